#!/usr/bin/env bash
# GPU check of the live harness. Run from the repository root on a machine with a CUDA GPU:
#   1. the tests marked `cuda` (tests/test_live_cuda.py: tree forward, greedy losslessness, timing);
#   2. the verification cost curve of a Qwen2.5-1.5B-shaped target (random weights built from its
#      config; real weights are not on the GPU box) with a Qwen2.5-0.5B-shaped draft, bf16 and fp32.
# Results go to $OUT when set (else ./gpu_check_out): test log, junit xml, cost_curve_*.json.
# Budget: about 3-5 minutes on one H100/H200-class GPU. Set PYTHON to choose the interpreter.
set -uo pipefail
PY="${PYTHON:-python}"
OUT="${OUT:-$(pwd)/gpu_check_out}"
mkdir -p "$OUT"
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check: no CUDA device visible to $PY; nothing to do" | tee "$OUT/gpu_check.txt"
    exit 0
fi
"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" | tee "$OUT/gpu_check.txt"

status=0
"$PY" -m pytest tests -m cuda -q -p no:cacheprovider --junitxml="$OUT/cuda-tests.xml" 2>&1 | tee "$OUT/cuda-tests.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

for dtype in bfloat16 float32; do
    "$PY" -m replay.cli cost-curve --shape qwen2.5-1.5b --draft-shape qwen2.5-0.5b --device cuda --dtype "$dtype" \
        --sizes 1,2,4,8,16,32,64,128 --prefix 512 --repeats 5 -o "$OUT/cost_curve_qwen2.5-1.5b_$dtype.json" \
        2>&1 | tee -a "$OUT/gpu_check.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
echo "gpu_check: exit $status; results in $OUT" | tee -a "$OUT/gpu_check.txt"
exit $status
