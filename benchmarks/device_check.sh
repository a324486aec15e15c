#!/bin/bash
# The encoder's budgets on a GPU machine, in one run of at most 5 minutes: prints one PASS/FAIL
# line per budget (benchmarks/bench_encoder.py --check) and exits 1 on a FAIL.
#
#   bash benchmarks/device_check.sh                  # paraeval and its dependencies installed
#   WHEELS=/path/to/wheels bash benchmarks/device_check.sh   # installed first from those wheels
#
# Budgets: the encoder pass >= 30,000 sentences/s at fp32 and >= 60,000 at bf16 on 24,000
# generated sentences; BERTScore + cosine cold on 60,000 unique sentences <= 2x the model's
# forward over them; tokenize + build + copy-out <= a quarter of the pass as built before.
set -euo pipefail
cd "$(dirname "$0")"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
PY=${PYTHON:-python3}
if [ -n "${WHEELS:-}" ]; then
  "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" --no-deps "$WHEELS"/*.whl
fi
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; \
print('device:', torch.cuda.get_device_name(), 'torch', torch.__version__)"
status=0
timeout 170 "$PY" bench_encoder.py --device cuda --sentences 24000 --batch-size 512 \
  --precisions fp32,bf16 --repeats 2 --memo-gib 16 --skip-cold --check || status=1
timeout 120 "$PY" bench_encoder.py --device cuda --sentences 60000 --batch-size 512 \
  --precisions fp32 --repeats 1 --memo-gib 32 --check || status=1
exit $status
