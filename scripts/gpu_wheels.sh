#!/usr/bin/env bash
# Fetch the wheels scripts/gpu_check.sh installs on a GPU machine without network: the transformers
# release the `live` extra pins (its other needs - huggingface_hub, tokenizers, safetensors - are in
# the GPU image). Run where pip reaches a registry, from the repository root; .whl/ is git-ignored
# and travels with the working tree when named in the device tool's `carry`.
set -euo pipefail
PY="${PYTHON:-python3}"
VERSION="${1:-5.24.0}"
"$PY" -m pip download -q --no-deps --only-binary=:all: -d .whl "transformers==$VERSION"
ls -la .whl
