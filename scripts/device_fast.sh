#!/bin/bash
# `playtester run explore` with its defaults (no performance option but --device cuda) on a machine
# with one NVIDIA GPU and 16 cores: the whole loop's steps/s at --envs 1, 4, 8 and 16, and the
# explorer's decision on the GPU. Issue 39; docs/benchmarks/ppo-and-loop.md, "The GPU path".
#
# Run from the repository root, on Python >= 3.11 with torch, torchvision, numpy, lightning, scipy,
# matplotlib, opencv, typer, rich, pyyaml, jinja2, tensorboard and torchmetrics installed, and:
#   ./.whl     the other wheels `run explore` imports, for the machine's Python (no dependencies
#              pulled; nothing else is installed, playtester itself runs from this checkout):
#                pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#                    --no-deps vizdoom==1.3.2 gymnasium==1.4.0 cloudpickle farama-notifications -d .whl
#   ./.models  path.ckpt, inspect.ckpt and detector.ckpt of `playtester demo` (its models/ folder)
# It writes $OUT/device_fast.txt (every run's line as it ends, then the table) and $OUT/env.txt.
# About 4 to 5 minutes: each --envs value is one round of one 200-step episode an instance; a
# value that overruns its limit is cut and says so, the others still run.
# (DEVICE=cpu ENVS=1 STEPS=30 MODELS=DIR LIMIT=900: a dry run of the script on a machine without a GPU.)
set -u
OUT=${OUT:?set OUT to the folder for the results}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
ENVS=${ENVS:-1 4 8 16}
STEPS=${STEPS:-200}
MODELS=${MODELS:-./.models}
LIMIT=${LIMIT:-110}
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "cores $(nproc), $($PY --version 2>&1)"
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
} >"$OUT/env.txt" 2>&1
if [ -d ./.whl ]; then
  $PY -m pip install -q --no-index --no-deps ./.whl/*.whl >>"$OUT/env.txt" 2>&1 || { echo "pip install of ./.whl failed" >>"$OUT/env.txt"; exit 1; }
fi
$PY -c "import vizdoom, gymnasium; print('vizdoom', vizdoom.__version__, 'gymnasium', gymnasium.__version__)" >>"$OUT/env.txt" 2>&1
for E in $ENVS; do
  echo "== envs $E (load $(cut -d' ' -f1 /proc/loadavg))" >>"$OUT/device_fast.txt"
  timeout "$LIMIT" $PY scripts/bench_loop.py --models "$MODELS" --envs "$E" --rounds 1 --episodes-per-env 1 --steps "$STEPS" \
      --decisions 50 --decision-device "$DEVICE" --new-args "--device $DEVICE" >>"$OUT/device_fast.txt" 2>&1 \
    || echo "envs $E: cut at $LIMIT s or failed (exit $?)" >>"$OUT/device_fast.txt"
done
grep -E "^new +[0-9]+ " "$OUT/device_fast.txt" | sed 's/^/table: /' >>"$OUT/device_fast.txt"
cat "$OUT/device_fast.txt"
