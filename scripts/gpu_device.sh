#!/bin/bash
# On a GPU machine without internet (see README, "GPU rollouts"):
#   bash scripts/gpu_device.sh unpack             # vLLM wheel set (chunks in /tmp) -> /tmp/site, model dirs -> /tmp/models
#   bash scripts/gpu_device.sh bench SHAPE WINDOW [LEVELS]   # serve SHAPE and run surfer bench gpu, JSON to $OUT
# SURFER_SRC: the directory holding the surfer package (default: this checkout).
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0
export PYTHONPATH=/tmp/site:${SURFER_SRC:-$here}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
cd /tmp  # python -m surfer must not find another checkout in the working directory
case $1 in
unpack)
  mkdir -p /tmp/site && cat /tmp/vllm-site.tar.xz.part* | xz -d -T0 | tar x -C /tmp/site && rm -f /tmp/vllm-site.tar.xz.part* || exit 1
  python3 -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())" || exit 1
  for shape in holotron holo2; do
    [ -d /tmp/models/$shape ] || python3 -m surfer bench gpu make-model $shape /tmp/models/$shape || exit 1
  done
  ;;
bench)
  set -o pipefail
  python3 -m surfer bench gpu run --model "$2=/tmp/models/$2" --levels "${4:-1,16,64,128}" --window "$3" \
    --out "$OUT/$2.json" --log-dir "$OUT" 2>&1 | tee "$OUT/$2-bench.log"
  ;;
*) echo "usage: $0 unpack | bench SHAPE WINDOW [LEVELS]"; exit 2 ;;
esac
