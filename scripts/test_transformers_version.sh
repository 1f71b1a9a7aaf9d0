#!/usr/bin/env bash
# Run the live-harness tests against another transformers release, without touching the venv:
#   scripts/test_transformers_version.sh 5.20.2
# The release is installed (no dependencies) into a scratch folder put first on PYTHONPATH. Use
# it before widening the `transformers` pin in pyproject.toml's `live` extra.
set -euo pipefail
VERSION="${1:?usage: $0 TRANSFORMERS_VERSION}"
PY="${PYTHON:-python}"
DIR="${TMPDIR:-/tmp}/specreplay-transformers-$VERSION"
[ -d "$DIR/transformers" ] || "$PY" -m pip install -q --no-deps --target "$DIR" "transformers==$VERSION"
PYTHONPATH="$DIR:$(pwd)" "$PY" -c "import transformers; print('transformers', transformers.__version__)"
PYTHONPATH="$DIR:$(pwd)" "$PY" -m pytest tests/test_live_*.py -q -p no:cacheprovider \
    --deselect tests/test_live_models.py::test_installed_transformers_is_within_the_declared_range
