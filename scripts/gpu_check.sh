#!/usr/bin/env bash
# GPU check of the live harness, unattended, on a fresh CUDA machine that has torch but maybe not
# our transformers and no network. Run from the repository root:
#     OUT=/some/dir scripts/gpu_check.sh            (results in $OUT, else ./gpu_check_out)
# Steps, each under its own time limit (at most 7.5 minutes in all, plus start-up):
#   0. wheels in .whl/ (scripts/gpu_wheels.sh fetches them where pip works) are installed into a
#      scratch folder first on PYTHONPATH, without network or dependencies;
#   1. the tests marked `cuda` (tests/test_live_cuda.py: tree forward, greedy losslessness with
#      fp32 and bf16 drafts, unrecorded rounds, static-cache/CUDA-graph fast path against the eager
#      path, sampling distribution over 1,200 seeds, synchronised timing);
#   2. cost curves of a Qwen2.5-1.5B-shaped target and a Qwen2.5-0.5B-shaped draft (random weights:
#      real weights do not travel), bfloat16 and float32;
#   3. the speed duel in bfloat16 (bench/duel.py --shapes qwen2.5 --fast-path): target-only vs HF
#      assisted generation vs the harness, eager and on the fast path (static caches + CUDA
#      graphs), every timing synchronised;
#   4. gpu_check.json: versions, each step's exit status and seconds, the test counts.
# Files written (at most 8): gpu_check.json, gpu_check.log, cuda_tests.xml,
# cost_curve_bfloat16.json, cost_curve_float32.json, duel_gpu.json.
set -uo pipefail
PY="${PYTHON:-python3}"
OUT="${OUT:-$(pwd)/gpu_check_out}"
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: >"$LOG"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

if ls .whl/*.whl >/dev/null 2>&1; then
    SITE="${TMPDIR:-/tmp}/specreplay-site"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl 2>&1 | tee -a "$LOG"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check: no CUDA device visible to $PY; nothing to do" | tee -a "$LOG"
    echo '{"status": "no CUDA device"}' >"$OUT/gpu_check.json"
    exit 0
fi
"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" 2>&1 | tee -a "$LOG"

STEPS=()
step() {  # step NAME SECONDS COMMAND...: run under a time limit, log it, record exit status and time
    local name="$1" limit="$2"
    shift 2
    echo "== $name (limit ${limit}s): $*" | tee -a "$LOG"
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    STEPS+=("$name $rc $((SECONDS - t0))")
    echo "== $name: exit $rc in $((SECONDS - t0)) s" | tee -a "$LOG"
}

step cuda_tests 180 "$PY" -m pytest tests/test_live_cuda.py -m cuda -q -s -p no:cacheprovider --junitxml="$OUT/cuda_tests.xml"
for dtype in bfloat16 float32; do
    step "cost_curve_$dtype" 40 "$PY" -m replay.cli cost-curve --shape qwen2.5-1.5b --draft-shape qwen2.5-0.5b --device cuda \
        --dtype "$dtype" --draft-dtype "$dtype" --sizes 1,2,4,8,16,32,64,128 --prefix 512 --repeats 5 -o "$OUT/cost_curve_$dtype.json"
done
step duel_bfloat16 190 "$PY" bench/duel.py --shapes qwen2.5 --device cuda --dtypes bfloat16 --prompts 3 --max-new-tokens 48 \
    --repeats 3 --fast-path --out "$OUT/duel_gpu.json"

"$PY" - "$OUT" "${STEPS[@]}" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys, xml.etree.ElementTree as ET
from pathlib import Path
import torch, transformers
out, steps = Path(sys.argv[1]), [s.split() for s in sys.argv[2:]]
summary = {
    "torch": torch.__version__, "transformers": transformers.__version__, "gpu": torch.cuda.get_device_name(0),
    "steps": {name: {"exit": int(rc), "seconds": int(sec)} for name, rc, sec in steps},
}
junit = out / "cuda_tests.xml"
if junit.is_file():
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    summary["tests"] = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
summary["status"] = "ok" if all(v["exit"] == 0 for v in summary["steps"].values()) else "failed"
(out / "gpu_check.json").write_text(json.dumps(summary, indent=1))
print(json.dumps(summary))
EOF
status=0
for s in "${STEPS[@]}"; do
    set -- $s
    [ "$2" -eq 0 ] || status=1
done
echo "gpu_check: exit $status; results in $OUT" | tee -a "$LOG"
exit $status
