#!/bin/bash
# On a GPU machine without internet (README, "GPU rollouts"), with the vLLM wheel set's chunks in /tmp:
#   bash scripts/gpu_device.sh unpack                   # chunks -> /tmp/site; model dirs -> /tmp/models
#   bash scripts/gpu_device.sh serve SHAPE [PORT]       # `surfer serve` in its own session; waits until it answers
#   bash scripts/gpu_device.sh bench SHAPE WINDOW [LEVELS] [PORT]   # surfer bench gpu run against it, JSON in $OUT
#   bash scripts/gpu_device.sh stop SHAPE               # stop that server (by its process id)
# Serving apart from the bench lets one lease run the levels in several commands of under 10 minutes
# (engine start: 3 to 6 minutes). SURFER_SRC: the directory holding the surfer package (default: this checkout).
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_SERVER_DEV_MODE=1
export PYTHONPATH=/tmp/site:${SURFER_SRC:-$here}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
cd /tmp  # python -m surfer must not find another checkout in the working directory
port=${3:-8000}
case $1 in
unpack)
  mkdir -p /tmp/site && cat /tmp/vllm-site.tar.xz.part* | xz -d -T0 | tar x -C /tmp/site && rm -f /tmp/vllm-site.tar.xz.part* || exit 1
  python3 -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())" || exit 1
  for shape in holotron holo2; do
    [ -d /tmp/models/$shape ] || python3 -m surfer bench gpu make-model $shape /tmp/models/$shape || exit 1
  done
  ;;
serve)
  started=$(date +%s)
  setsid nohup python3 -m surfer serve /tmp/models/$2 --profile $2 --port $port --max-concurrency 128 -- \
    --load-format dummy --structured-outputs-config '{"backend": "xgrammar", "disable_any_whitespace": true}' \
    > "$OUT/vllm-$2.log" 2>&1 < /dev/null &
  until curl -s -m 2 127.0.0.1:$port/v1/models > /dev/null; do
    kill -0 $! 2> /dev/null || { tail -30 "$OUT/vllm-$2.log"; exit 1; }
    sleep 1
  done
  echo "$2 answers after $(( $(date +%s) - started )) s"
  ;;
bench)
  set -o pipefail
  python3 -m surfer bench gpu run --base-url http://127.0.0.1:${5:-8000}/v1 --model "$2=/tmp/models/$2" \
    --levels "${4:-1,16,64,128}" --window "$3" --out "$OUT/$2-${4:-all}.json" 2>&1 | tee "$OUT/$2-bench.log"
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
  ;;
stop)
  pid=$(pgrep -f "surfer serve /tmp/models/$2 " | head -1)
  [ -n "$pid" ] && kill -TERM -- -"$pid"
  ;;
*) echo "usage: $0 unpack | serve SHAPE [PORT] | bench SHAPE WINDOW [LEVELS] [PORT] | stop SHAPE"; exit 2 ;;
esac
