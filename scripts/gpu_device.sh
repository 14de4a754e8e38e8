#!/bin/bash
# On a GPU machine without internet (docs/benchmarks/gpu.md), with the vLLM wheel set's chunks in /tmp:
#   bash scripts/gpu_device.sh unpack                   # chunks -> /tmp/site; model dirs -> /tmp/models
#   bash scripts/gpu_device.sh serve SHAPE [PORT]       # `surfer serve` in its own session; waits until it answers
#     (`start SHAPE [PORT]` only starts it, `wait SHAPE [PORT]` waits; the log is /tmp/vllm-SHAPE.log)
#   bash scripts/gpu_device.sh bench SHAPE WINDOW [LEVELS] [PORT] [TAG]   # surfer bench gpu run against it, JSON in $OUT
#     (BENCH_ARGS: more `surfer bench gpu run` options, e.g. "--layouts window,blocks --auto --no-bare", or
#      "--variants $PWD/benchmarks/variants-levers.toml --no-bare --min-steps 5": client-side variants in one server start;
#      serve with MAX_CONCURRENCY=256 SERVE_ARGS="--max-images 32" for the deep-history / 256-session variants)
#   bash scripts/gpu_device.sh stop SHAPE               # stop that server and wait until it has exited
#   bash scripts/gpu_device.sh levers                   # in the background: serve each of SHAPES (holotron holo2) in
#     turn and bench LEVERS (today's requests against blocks + role continuation) at 64 sessions; results in /tmp/out
#     (vLLM's environment variables pass through, e.g. VLLM_PREFIX_CACHE_RETENTION_INTERVAL=0 bash ... levers;
#      LEVERS: variants, `#` between groups that run as separate benches; WINDOW, MIN_STEPS, MAX_CONCURRENCY, SERVE_ARGS,
#      LEVER_ARGS (more bench options, e.g. "--session-steps 48" for warm_steps variants, "--auto-only");
#      LEVELS (default 64; with --auto-only, "16,64" starts auto at 16 and lets it reach 64);
#      LEVERS_holo2=..., WINDOW_holo2=... for one model only; RUN_TAG=ret0 names a second run's files apart)
#   bash scripts/gpu_device.sh collect SECONDS          # wait up to SECONDS for `levers` to finish; /tmp/out and the
#     servers' logs to $OUT/collected.tar.gz
#     (a call every few minutes keeps the lease warm while the background run goes on)
#   bash scripts/gpu_device.sh replicas SHAPE GPUS [PORT]  # `surfer serve --gpus GPUS` in its own session: one replica
#     per GPU on PORT, PORT+1, ...; waits until every one answers (DATA_PARALLEL=1: one endpoint, the engine's data
#     parallelism; TP=2: two GPUs per copy; the log is /tmp/ENGINE-SHAPE-replicas.log)
#   bash scripts/gpu_device.sh bench-replicas SHAPE WINDOW LEVELS GPUS [PORT] [TAG]  # the bench against every replica
#     (PLACEMENT=round-robin-per-request: each request to the next replica, a load balancer without affinity)
#   bash scripts/gpu_device.sh stop-replicas SHAPE      # stop them and wait until the GPUs' memory is given back
#   bash scripts/gpu_device.sh servers                  # in the background (results in /tmp/out; `collect` as for levers):
#     SHAPE (default holotron) served on GPUS (default 2) replicas from one start: the first alone at SESSIONS (default
#     64), then all at GPUS x SESSIONS with surfer's placement and with round-robin per request (VARIANT, WINDOW,
#     PLAN_ARGS; PLACEMENTS=session: placement alone; DATA_PARALLEL_TOO=1: then the engine's data parallelism behind
#     one endpoint)
# Serving apart from the bench lets one lease run the levels in several commands of under 10 minutes
# (engine start: 3 to 6 minutes). SURFER_SRC: the directory holding the surfer package (default: this checkout).
# ENGINE=sglang (default vllm): serve with SGLang from /tmp/sgl-site (its own transformers and tokenizers: never
# on one path with vLLM's /tmp/site); its JIT kernels need nvcc, ninja and CUDA_HOME.
here=$(cd "$(dirname "$0")/.." && pwd)
ENGINE=${ENGINE:-vllm}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_SERVER_DEV_MODE=1
if [ "$ENGINE" = sglang ]; then
  export PYTHONPATH=/tmp/sgl-site:${SURFER_SRC:-$here}
  nvcc_path=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
  [ -n "$nvcc_path" ] && export CUDA_HOME=$(dirname "$(dirname "$nvcc_path")")
  export PATH=/opt/torch/.venv/bin:${CUDA_HOME:-/usr/local/cuda}/bin:$PATH FLASHINFER_CUDA_ARCH_LIST=9.0a
  ENGINE_DUMMY="--load-format dummy --constrained-json-disable-any-whitespace --sampling-backend pytorch"
else
  export PYTHONPATH=/tmp/site:${SURFER_SRC:-$here}
  ENGINE_DUMMY="--load-format dummy --structured-outputs-config {\"backend\":\"xgrammar\",\"disable_any_whitespace\":true}"
fi
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
cd /tmp  # python -m surfer must not find another checkout in the working directory
port=${3:-8000}

from_a_copy() {  # run this script's command $1 in the background (its log /tmp/out/levers.log), from a copy of the
  # checkout; CARRIED: the checkout's .gpu/, where later calls carry the next chunks
  mkdir -p /tmp/out && rm -f /tmp/out/levers.done && rm -rf /tmp/plan-src && cp -r "$here" /tmp/plan-src \
    && rm -rf /tmp/plan-src/.gpu
  CARRIED=$here/.gpu SURFER_SRC=/tmp/plan-src setsid nohup bash /tmp/plan-src/scripts/gpu_device.sh "$1" \
    > /tmp/out/levers.log 2>&1 < /dev/null &
}

case $1 in
unpack)
  # the chunks in /tmp (scripts/gpu_sets.py builds them; a call carries .gpu/ and copies its chunks there):
  # vllm-* -> /tmp/site; sglang-* -> /tmp/sgl-site
  # only ENGINE's set (a set already unpacked, its chunks carried again, is left alone)
  cp "${CARRIED:-$here/.gpu}"/*.tar.*.part* /tmp/ 2> /dev/null
  for part in /tmp/$ENGINE-*.tar.xz.part0 /tmp/$ENGINE-*.tar.gz.part0; do
    [ -e "$part" ] || continue
    set=$(basename "$part" .part0)  # NAME.tar.xz or NAME.tar.gz
    unzip="xz -d -T0"; case $set in *.gz) unzip="gzip -dc" ;; esac
    dest=/tmp/site; case $set in sglang*) dest=/tmp/sgl-site ;; esac
    mkdir -p $dest && cat /tmp/$set.part* | $unzip | tar x --sparse -C $dest && rm -f /tmp/$set.part* || exit 1
  done
  if [ "$ENGINE" = sglang ]; then
    python3 -c "import sglang, sglang.launch_server, dill, loguru, soundfile, compressed_tensors, torch, transformers; print('sglang', sglang.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())" || exit 1
  else
    python3 -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())" || exit 1
  fi
  for shape in holotron holo2; do
    [ -d /tmp/models/$shape ] || python3 -m surfer bench gpu make-model $shape /tmp/models/$shape || exit 1
  done
  ;;
serve|start|wait)
  if [ "$1" != wait ]; then
    # a server left on the port (an earlier plan's, or an engine's HTTP worker that outlived it) would answer
    # the wait below for another model: refuse to start beside it
    if curl -s -m 2 127.0.0.1:$port/v1/models > /dev/null; then
      echo "port $port already answers ($(curl -s -m 2 127.0.0.1:$port/v1/models | head -c 200)): stop it first"; exit 1
    fi
    date +%s > /tmp/$ENGINE-$2.started
    # SERVE_ARGS: more `surfer serve` options (e.g. "--max-images 32" for deep histories); VLLM_ARGS: more engine flags
    setsid nohup python3 -m surfer serve /tmp/models/$2 --profile $2 --engine $ENGINE --port $port \
      --max-concurrency ${MAX_CONCURRENCY:-128} --prompt-layout blocks $SERVE_ARGS -- $ENGINE_DUMMY $VLLM_ARGS \
      > /tmp/$ENGINE-$2.log 2>&1 < /dev/null &
  fi
  [ "$1" = start ] && { echo "$2 starting ($ENGINE)"; exit 0; }
  until curl -s -m 2 127.0.0.1:$port/v1/models > /dev/null; do
    pgrep -f "surfer serve /tmp/models/$2 " > /dev/null || { tail -30 /tmp/$ENGINE-$2.log; exit 1; }
    sleep 1
  done
  echo "$2 answers after $(( $(date +%s) - $(cat /tmp/$ENGINE-$2.started) )) s ($ENGINE)"
  ;;
bench)
  set -o pipefail
  tag=$2-${6:-${4:-all}}
  python3 -m surfer bench gpu run --base-url http://127.0.0.1:${5:-8000}/v1 --model "$2=/tmp/models/$2" \
    --levels "${4:-1,16,64,128}" --window "$3" --out "$OUT/$tag.json" $BENCH_ARGS 2>&1 | tee "$OUT/$tag.log"
  status=$?
  cp /tmp/$ENGINE-$2.log "$OUT/" 2> /dev/null
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
  exit $status
  ;;
stop)
  pid=$(pgrep -f "surfer serve /tmp/models/$2 " | head -1)
  [ -n "$pid" ] && kill -TERM -- -"$pid"
  for _ in $(seq 60); do curl -s -m 1 127.0.0.1:$port/v1/models > /dev/null || break; sleep 1; done
  # an engine's workers that outlived it (SGLang's tokenizer workers answered /v1/models after its stop)
  pkill -9 -f "sglang::|sglang.launch_server|EngineCore|vllm serve" 2> /dev/null
  for pid in $(ss -ltnp 2> /dev/null | grep ":$port " | grep -o 'pid=[0-9]*' | cut -d= -f2); do kill -9 "$pid"; done
  for _ in $(seq 90); do  # until every GPU's memory is given back
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | awk '$1 >= 2000 {busy = 1} END {exit busy}' && break
    sleep 1
  done
  nvidia-smi --query-gpu=memory.used --format=csv,noheader
  ;;
levers)
  mkdir -p /tmp/out && rm -f /tmp/out/levers.done
  setsid nohup bash "$here/scripts/gpu_device.sh" levers-run > /tmp/out/levers.log 2>&1 < /dev/null &
  echo "levers running: /tmp/out/levers.log"
  ;;
levers-run)
  for shape in ${SHAPES:-holotron holo2}; do
    MAX_CONCURRENCY=${MAX_CONCURRENCY:-128} bash "$here/scripts/gpu_device.sh" serve "$shape" || continue
    # LEVERS: groups of variants separated by `#`, each group one bench run (its own JSON: levers, levers-2, ...)
    # LEVERS_<shape> / WINDOW_<shape> (e.g. LEVERS_holo2) override LEVERS / WINDOW for that model
    levers_of=LEVERS_$shape window_of=WINDOW_$shape
    IFS='#' read -ra groups <<< "${!levers_of:-${LEVERS:-layout=window,continuation=off;layout=blocks,continuation=on}}"
    n=0
    for group in "${groups[@]}"; do
      n=$((n + 1))
      # LEVER_ARGS_<n> / LEVELS_<n> / WINDOW_<n> override LEVER_ARGS / LEVELS / the window for group n (e.g. an
      # --auto-only group after fixed-concurrency ones, on the same server start)
      args_of=LEVER_ARGS_$n levels_of=LEVELS_$n group_window_of=WINDOW_$n
      OUT=/tmp/out BENCH_ARGS="--variants $group --no-bare --min-steps ${MIN_STEPS:-2} ${!args_of-$LEVER_ARGS}" \
        bash "$here/scripts/gpu_device.sh" bench "$shape" "${!group_window_of:-${!window_of:-${WINDOW:-300}}}" \
        "${!levels_of:-${LEVELS:-64}}" 8000 "levers${RUN_TAG:+-$RUN_TAG}$( [ $n -gt 1 ] && echo -$n)"
    done
    bash "$here/scripts/gpu_device.sh" stop "$shape"
  done
  touch /tmp/out/levers.done
  ;;
plan)
  # PLAN="sglang/holotron sglang/holo2 vllm/holotron": each engine/model in turn, its variants LEVERS_<engine>_<shape>,
  # its engine flags ARGS_<engine>, more bench options PLAN_ARGS (e.g. "--no-ending"); vLLM's chunk may arrive
  # (in /tmp) while the first entries run
  # (from a copy of the checkout: the device's working tree is copied again at every call, and a bench reading the
  # demo's screenshots at that moment found one missing)
  from_a_copy plan-run
  echo "plan running: /tmp/out/levers.log"
  ;;
plan-run)
  for entry in $PLAN; do
    # ENGINE/SHAPE[@VAR=VALUE,...]: the server's environment for this entry (e.g. sglang/holotron@OMP_NUM_THREADS=2);
    # its results are named ENGINE-VAR-VALUE... (the device returns no file with `=` in its name)
    settings=""; [[ $entry == *@* ]] && settings=${entry#*@} && entry=${entry%%@*}
    engine=${entry%/*} shape=${entry#*/} tag=$engine${settings:+-${settings//[,=]/-}}
    for pair in ${settings//,/ }; do export "${pair?}"; done
    if [ "$engine" = vllm ] && [ ! -d /tmp/site/vllm ]; then
      # every chunk its manifest names (carry the manifest with the first chunk), carried while earlier entries ran
      for _ in $(seq 900); do
        python3 -c "import glob, json, os, sys; m = glob.glob(sys.argv[1] + '/vllm-*.manifest.json'); sys.exit(not m or any(not os.path.exists(os.path.join(sys.argv[1], c)) for c in json.load(open(m[0]))['chunks']))" "$CARRIED" && break
        sleep 1
      done
      ENGINE=vllm bash "$here/scripts/gpu_device.sh" unpack || continue
    fi
    args_of=ARGS_$engine levers_of=LEVERS_${engine}_$shape
    ENGINE=$engine VLLM_ARGS="${!args_of}" bash "$here/scripts/gpu_device.sh" serve "$shape" || continue
    # PLAN_HOOK: commands run against each served model before its bench, with $engine and $shape set (e.g.
    # 'bash scripts/gpu_device.sh seeds-bench $shape text on; python3 scripts/vllm_tokens_probe.py ...')
    [ -n "$PLAN_HOOK" ] && (cd "$here" && eval "$PLAN_HOOK") 2>&1 | tee -a "/tmp/out/hook-$engine-$shape.log"
    # what the host's CPU does a minute into the bench (SGLang's tokenizer workers, the scheduler, the bench)
    (sleep 60; top -b -n 1 -w 220 | head -45 > "/tmp/out/top-$shape-$tag.txt") &
    # PLAN_BARE=1: each level's requests also replayed without browsers (surfer against the bare replay)
    bare=--no-bare; [ -n "$PLAN_BARE" ] && bare=""
    ENGINE=$engine OUT=/tmp/out BENCH_ARGS="--variants ${!levers_of} $bare --min-steps ${MIN_STEPS:-3} $PLAN_ARGS" \
      bash "$here/scripts/gpu_device.sh" bench "$shape" "${WINDOW:-240}" "${LEVELS:-64}" 8000 "$tag"
    ENGINE=$engine bash "$here/scripts/gpu_device.sh" stop "$shape"
    for pair in ${settings//,/ }; do unset "${pair%%=*}"; done
  done
  touch /tmp/out/levers.done
  ;;
collect)
  # everything in /tmp/out and each server's log (less its request lines), as one archive (a call returns at most
  # 8 files):
  # $OUT/collected.tar.gz, unpacked here with `tar xzf`
  for _ in $(seq "${2:-60}"); do [ -e /tmp/out/levers.done ] && break; sleep 1; done
  tail -5 /tmp/out/levers.log
  rm -rf /tmp/collect && mkdir -p /tmp/collect && cp -r /tmp/out/. /tmp/collect/
  rm -f /tmp/collect/*-sglang.log /tmp/collect/*-vllm.log /tmp/collect/levers.done  # (in levers.log too)
  for log in /tmp/vllm-*.log /tmp/sglang-*.log; do
    [ -e "$log" ] && grep -v "POST /v1/chat/completions\|POST /generate\|GET /metrics\|state was deleted" "$log" \
      > "/tmp/collect/$(basename "$log")"
  done
  tar czf "$OUT/collected.tar.gz" -C /tmp/collect . && ls -la /tmp/collect | tail -n +4
  [ -e /tmp/out/levers.done ] && echo "levers done" || echo "levers still running"
  ;;
replicas)
  gpus=${3:-2} port=${4:-8000}
  date +%s > /tmp/$ENGINE-$2.started
  extra=""; [ -n "$DATA_PARALLEL" ] && extra="--data-parallel"
  setsid nohup python3 -m surfer serve /tmp/models/$2 --profile $2 --engine $ENGINE --port $port --gpus $gpus \
    --tp ${TP:-1} $extra --max-concurrency ${MAX_CONCURRENCY:-128} --prompt-layout blocks $SERVE_ARGS -- $ENGINE_DUMMY \
    $VLLM_ARGS > /tmp/$ENGINE-$2-replicas.log 2>&1 < /dev/null &
  count=$(( gpus / ${TP:-1} )); [ -n "$DATA_PARALLEL" ] && count=1
  for n in $(seq 0 $(( count - 1 ))); do
    until curl -s -m 2 127.0.0.1:$(( port + n ))/v1/models > /dev/null; do
      pgrep -f "surfer serve /tmp/models/$2 " > /dev/null || { tail -30 /tmp/$ENGINE-$2-replicas.log; exit 1; }
      sleep 1
    done
  done
  echo "$2: $count endpoint(s) answer after $(( $(date +%s) - $(cat /tmp/$ENGINE-$2.started) )) s ($ENGINE, $gpus GPUs)"
  ;;
bench-replicas)
  set -o pipefail
  gpus=${5:-2} port=${6:-8000} urls=""
  for n in $(seq 0 $(( gpus - 1 ))); do urls="$urls --base-url http://127.0.0.1:$(( port + n ))/v1"; done
  tag=$2-${7:-replicas-${PLACEMENT:-session}}
  python3 -m surfer bench gpu run $urls --placement ${PLACEMENT:-session} --model "$2=/tmp/models/$2" \
    --levels "$4" --window "$3" --out "$OUT/$tag.json" $BENCH_ARGS 2>&1 | tee "$OUT/$tag.log"
  status=$?
  cp /tmp/$ENGINE-$2-replicas.log "$OUT/" 2> /dev/null
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
  exit $status
  ;;
stop-replicas)
  bash "$here/scripts/gpu_device.sh" stop "$2"
  ;;
servers)
  from_a_copy servers-run
  echo "servers running: /tmp/out/levers.log"
  ;;
servers-run)
  # one start of GPUS replicas (one per GPU): the first replica alone at SESSIONS (the one-GPU baseline, same start),
  # then all of them at GPUS x SESSIONS with surfer's per-session placement and with round robin per request;
  # DATA_PARALLEL_TOO=1: then the engine's own data parallelism behind one endpoint (a second start), with
  # DP_PLACEMENTS (default: session, then round-robin-per-request)
  shape=${SHAPE:-holotron} gpus=${GPUS:-2} sessions=${SESSIONS:-64} window=${WINDOW:-300}
  args="--variants ${VARIANT:-layout=window,continuation=on} --no-bare --min-steps ${MIN_STEPS:-3} $PLAN_ARGS"
  if bash "$here/scripts/gpu_device.sh" replicas "$shape" "$gpus"; then
    (sleep 60; nvidia-smi > /tmp/out/nvidia-smi-one-replica.txt) &
    OUT=/tmp/out BENCH_ARGS="$args" bash "$here/scripts/gpu_device.sh" bench-replicas "$shape" "$window" "$sessions" 1 \
      8000 one-replica
    for placement in ${PLACEMENTS:-session round-robin-per-request}; do
      (sleep 60; nvidia-smi > /tmp/out/nvidia-smi-$placement.txt; top -b -n 1 -w 220 | head -40 > /tmp/out/top-$placement.txt) &
      PLACEMENT=$placement OUT=/tmp/out BENCH_ARGS="$args" bash "$here/scripts/gpu_device.sh" bench-replicas "$shape" \
        "$window" "$(( gpus * sessions ))" "$gpus" 8000 "replicas-$placement"
    done
  fi
  bash "$here/scripts/gpu_device.sh" stop-replicas "$shape"
  if [ -n "$DATA_PARALLEL_TOO" ]; then
    # the second start writes the same log: the first one's kept apart (collect takes both, less request lines)
    mv /tmp/$ENGINE-$shape-replicas.log /tmp/$ENGINE-$shape-replicas-first.log 2> /dev/null
    rm -f /tmp/out/$ENGINE-$shape-replicas.log
    # each session kept on one rank (surfer's rank per request), then no rank (the engine spreads the requests)
    if DATA_PARALLEL=1 bash "$here/scripts/gpu_device.sh" replicas "$shape" "$gpus"; then
      for placement in ${DP_PLACEMENTS:-session round-robin-per-request}; do
        (sleep 60; nvidia-smi > /tmp/out/nvidia-smi-data-parallel-$placement.txt) &
        OUT=/tmp/out BENCH_ARGS="$args --placement $placement" bash "$here/scripts/gpu_device.sh" bench "$shape" \
          "$window" "$(( gpus * sessions ))" 8000 "data-parallel-$placement"
      done
    fi
    bash "$here/scripts/gpu_device.sh" stop-replicas "$shape"
  fi
  touch /tmp/out/levers.done
  ;;
seeds)
  # the seeds' headline without surfer (vLLM's own serving benchmark), in the background (`collect` as for levers):
  # SEEDS="holotron:off holo2:on holotron:on" (model:prefix caching), each served alone, then `vllm bench serve` with
  # random multimodal requests: 1-4 screenshots of 1280x800, 1,000 text tokens, 128-512 output tokens, 100 at once
  # (REGIMES="mm text long long-16000": also a decode-heavy text-only load, 1,000 in and 1,024 out, and long
  # contexts, 8,000 (or N) in and 1,024 out, in the same server start)
  mkdir -p /tmp/out && rm -f /tmp/out/levers.done
  setsid nohup bash "$here/scripts/gpu_device.sh" seeds-run > /tmp/out/levers.log 2>&1 < /dev/null &
  echo "seeds running: /tmp/out/levers.log"
  ;;
seeds-run)
  for entry in ${SEEDS:-holotron:off holo2:on holotron:on}; do
    shape=${entry%:*} caching=${entry#*:} off=""
    [ "$caching" = off ] && off="--no-enable-prefix-caching"
    SERVE_ARGS="--max-images 4" VLLM_ARGS="$off" bash "$here/scripts/gpu_device.sh" serve "$shape" || continue
    for regime in ${REGIMES:-mm}; do
      bash "$here/scripts/gpu_device.sh" seeds-bench "$shape" "$regime" "$caching"
    done
    cp /tmp/vllm-$shape.log "/tmp/out/seeds-$shape-caching-$caching.server.log"
    bash "$here/scripts/gpu_device.sh" stop "$shape"
  done
  touch /tmp/out/levers.done
  ;;
seeds-bench)
  # SHAPE REGIME CACHING: one `vllm bench serve` against the server on port 8000 (mm: the seeds' screenshots;
  # text: decode-heavy, no image, 1,000 in and 1,024 out; long: 8,000 in and 1,024 out; long-16000: 16,000 in);
  # CACHING only names the result file
  shape=$2 regime=$3 caching=$4
  common=(--backend openai-chat --endpoint /v1/chat/completions --base-url http://127.0.0.1:8000
          --model /tmp/models/$shape --tokenizer /tmp/models/$shape --trust-remote-code --seed 0
          --num-prompts ${PROMPTS:-300} --max-concurrency ${CONCURRENCY:-100} --ignore-eos --save-result
          --result-dir /tmp/out)
  if [ "$regime" = text ]; then
    python3 -m vllm.entrypoints.cli.main bench serve "${common[@]}" --dataset-name random \
      --random-input-len 1000 --random-output-len 1024 --random-range-ratio 0.0 \
      --result-filename "seeds-text-$shape-caching-$caching.json" 2>&1 | tail -40
  elif [ "${regime%%-*}" = long ]; then
    # long contexts (`long`: LONG_IN random prompt tokens, default 8,000; `long-N`: N of them; 1,024 out): 100 at
    # once need more KV cache than an 80 GB card holds for a transformer (about 144 KB a token for Holo2-8B), not
    # for the hybrid (24 KB and a constant state); the server's log says how many ran at once
    length=${LONG_IN:-8000}
    [ "$regime" != long ] && length=${regime#long-}
    python3 -m vllm.entrypoints.cli.main bench serve "${common[@]}" --dataset-name random \
      --random-input-len "$length" --random-output-len 1024 --random-range-ratio 0.0 \
      --result-filename "seeds-$regime-$shape-caching-$caching.json" 2>&1 | tail -40
  else
    python3 -m vllm.entrypoints.cli.main bench serve "${common[@]}" --dataset-name random-mm \
      --random-input-len 1000 --random-output-len 320 --random-range-ratio '{"input": 0.0, "output": 0.6}' \
      --random-mm-base-items-per-request 3 --random-mm-num-mm-items-range-ratio 0.5 \
      --random-mm-limit-mm-per-prompt '{"image": 4, "video": 0}' --random-mm-bucket-config '{(800, 1280, 1): 1.0}' \
      --result-filename "seeds-$shape-caching-$caching.json" 2>&1 | tail -40
  fi
  ;;
*) echo "usage: $0 unpack | serve|start|wait SHAPE [PORT] | bench SHAPE WINDOW [LEVELS] [PORT] [TAG] | stop SHAPE | levers | collect SECONDS | replicas SHAPE GPUS [PORT] | bench-replicas SHAPE WINDOW LEVELS GPUS [PORT] [TAG] | stop-replicas SHAPE | servers | seeds"; exit 2 ;;
esac
