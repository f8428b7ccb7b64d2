#!/bin/bash
# Issue 39's figures that need one NVIDIA GPU and 16 cores, in about 4 minutes: the explorer's
# decision on one quiet thread (bench_ppo.py --part latency: the action path of the defaults, int8,
# against the old per-step decision, fp32 actor + preference + RND), then `playtester run explore`
# with its defaults (no option but `device: cuda`) and the whole loop's steps/s at --envs 1, 4, 8
# and 16 (bench_loop.py, one round each of one 200-step episode an instance).
# docs/benchmarks/ppo-and-loop.md, "The GPU path, and one quiet thread".
#
# Here, in the repository root, once (the machine reaches no registry; a call carries 64 MiB):
#   echo /.device/ >> .git/info/exclude
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --no-deps vizdoom==1.3.2 gymnasium==1.4.0 farama-notifications -d /tmp/wheels
#   python scripts/device_pack.py pack --models DEMO/models --wheels /tmp/wheels --out .device   # 58 MB
# (DEMO/models: `playtester demo`'s path.ckpt, inspect.ckpt and detector.ckpt.) Then on the machine:
#   bash scripts/device_fast.sh          (carry .device; results in $OUT/device_fast.txt and $OUT/env.txt)
# Each part gets at most what is left of TOTAL seconds (230); a part cut short says so, the others run.
# A dry run without a GPU: DEVICE=cpu ENVS=1 STEPS=30 MODELS=DIR LATENCY=0 OUT=/tmp/x bash scripts/device_fast.sh
set -u
OUT=${OUT:?set OUT to the folder for the results}
PY=${PYTHON:-python3}
PACK=${PACK:-./.device}
MODELS=${MODELS:-./.models}
DEVICE=${DEVICE:-cuda}
ENVS=${ENVS:-1 4 8 16}
STEPS=${STEPS:-200}
TOTAL=${TOTAL:-230}
LATENCY=${LATENCY:-1}
START=$SECONDS
mkdir -p "$OUT"
LOG="$OUT/device_fast.txt"
: >"$LOG"
left() { echo $((TOTAL - (SECONDS - START))); }
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "no nvidia-smi"
  echo "cores $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg), $($PY --version 2>&1)"
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
} >"$OUT/env.txt" 2>&1
if ls "$PACK"/*.whl >/dev/null 2>&1; then  # what `run explore` imports that the machine lacks
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$PACK"/*.whl \
      >>"$OUT/env.txt" 2>&1 || { echo "pip install of $PACK's wheels failed" | tee -a "$LOG"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if [ -f "$PACK/models.pt.xz" ]; then
  $PY scripts/device_pack.py unpack "$PACK" --out "$MODELS" >>"$OUT/env.txt" 2>&1 \
    || { echo "unpacking $PACK/models.pt.xz failed" | tee -a "$LOG"; exit 1; }
fi
# playtester from this checkout, laid out as installed (as bench_loop.py does for each tree it runs)
SITE=$(mktemp -d /tmp/playtester-site.XXXX)
$PY -c "import sys; from pathlib import Path; sys.path.insert(0, 'scripts'); from bench_loop import site_folder; site_folder(Path('.'), Path(sys.argv[1]))" "$SITE"
$PY -c "import vizdoom, gymnasium; print('vizdoom', vizdoom.__version__, 'gymnasium', gymnasium.__version__)" >>"$OUT/env.txt" 2>&1

if [ "$LATENCY" = 1 ]; then
  echo "== the decision on one thread (load $(cut -d' ' -f1 /proc/loadavg))" >>"$LOG"
  PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} timeout "$(left)" nice -n 10 $PY scripts/bench_ppo.py --part latency --threads 1 >>"$LOG" 2>&1 \
    || echo "latency: cut at the time left or failed (exit $?)" >>"$LOG"
fi
echo "device: $DEVICE" >"$SITE/device.yaml"  # `device` is one of run explore's --config options
for E in $ENVS; do
  [ "$(left)" -gt 20 ] || { echo "envs $E: not run, no time left of $TOTAL s" >>"$LOG"; continue; }
  echo "== envs $E (load $(cut -d' ' -f1 /proc/loadavg))" >>"$LOG"
  timeout "$(left)" nice -n 10 $PY scripts/bench_loop.py --models "$MODELS" --envs "$E" --rounds 1 --episodes-per-env 1 \
      --steps "$STEPS" --decisions 50 --decision-device "$DEVICE" --new-args "--config $SITE/device.yaml" >>"$LOG" 2>&1 \
    || echo "envs $E: cut at the time left or failed (exit $?)" >>"$LOG"
done
echo "== $((SECONDS - START)) s in all" >>"$LOG"
grep -E "^new +[0-9]+ " "$LOG" | sed 's/^/table: /' >>"$LOG"
cat "$LOG"
