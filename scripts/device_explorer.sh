#!/bin/bash
# The explorers side by side over 5 seeds on a machine with one NVIDIA GPU and 16 cores (issue 41;
# docs/benchmarks/explorer.md): the paper's 40 × 40 park (coverage and OOIs tested, the demo's
# detector and test policy) and Freedoom 2 levels under immortal rules (reachable coverage), every
# run of a phase at once, each phase stopped after its wall limit and scored at the most whole
# episodes EVERY run of it has played (`bench_agents.py --cut max`: one fixed budget for all, the
# limit only decides which), with one-sided Mann–Whitney U and effect sizes.
#
# Here, once (a machine with pip and the demo's models; about 6 minutes, mostly xz):
#   scripts/device_explorer.sh prepare [MODELS]      # MODELS: path.ckpt, inspect.ckpt, detector.ckpt
# writes .device-explorer/ (git-ignored; carry it): site.tar.xz (ViZDoom 1.3.2 with Freedoom 2,
# Gymnasium 1.4.0 and Farama-Notifications for Python 3.12, the packages the device's image lacks;
# Freedoom 1 is left out, the tree must stay under 64 MiB) and models.pt (the three checkpoints in
# float16, the encoder the two policies share stored once; restored to float32 there).
#
# There, from the repository root (the run tool: carry [".device-explorer"]):
#   OUT=/some/folder scripts/device_explorer.sh
# writes $OUT/explorer.txt (the tables and the tests), $OUT/env.txt, $OUT/park.log, $OUT/levels.log
# and $OUT/results.tar.xz (each phase's agents.json, results and figures). Default: about 4 minutes
# of wall time (PARK_LIMIT 130 s + LEVEL_LIMIT 80 s + unpacking and scoring), at budgets that such
# a window can finish (PARK_STEPS 500, LEVEL_STEPS 400 a episode). The issue's budget is
#   PARK_EPISODES=18 PARK_STEPS=2000 LEVEL_EPISODES=10 LEVEL_STEPS=1000 PARK_LIMIT=... LEVEL_LIMIT=...
# with limits from the steps/s this script prints (explorer.txt's "steps/s" lines).
# Other settings: AGENTS (empty: no park), LEVEL_AGENTS, LEVELS (empty: no levels), SEEDS, DEVICE (cuda; cpu for a
# dry run), ENVS (1), LEVEL_PREFERENCE (a path policy trained on level-walk demos, carried beside;
# default the park's path policy, which has no USE key: the PPO agents cannot open doors), MODELS
# (a folder of the three checkpoints instead of the packed ones).
# A dry run on a machine without a GPU: DEVICE=cpu with small budgets (docs/benchmarks/explorer.md).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PACK=${PACK:-.device-explorer}

if [ "${1:-}" = prepare ]; then
  MODELS=${2:-playtester-demo/models}
  for f in path inspect detector; do
    [ -f "$MODELS/$f.ckpt" ] || { echo "error: $MODELS/$f.ckpt is missing; give the folder of the demo's models" >&2; exit 2; }
  done
  mkdir -p "$PACK"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$tmp/whl" vizdoom==1.3.2 gymnasium==1.4.0 farama-notifications==0.0.6 || exit 1
  mkdir "$tmp/site"
  for w in "$tmp"/whl/*.whl; do (cd "$tmp/site" && unzip -q -o "$w") || exit 1; done
  rm -f "$tmp/site/vizdoom/freedoom1.wad"
  tar -C "$tmp/site" -cf - . | xz -9 -T0 >"$PACK/site.tar.xz.partial" && mv "$PACK/site.tar.xz.partial" "$PACK/site.tar.xz" || exit 1
  $PY - "$MODELS" "$PACK/models.pt" <<'EOF' || exit 1
import os, sys, torch
models, dest = sys.argv[1], sys.argv[2]
packed, seen = {}, {}
for name in ("path", "inspect", "detector"):
    ckpt = torch.load(os.path.join(models, f"{name}.ckpt"), map_location="cpu", weights_only=False)
    state = {}
    for key, t in ckpt["state_dict"].items():
        same = seen.get((key, tuple(t.shape)))
        if same is not None and torch.equal(same[1], t):
            state[key] = ("same", same[0])  # the encoder the policies share: stored once
        elif t.is_floating_point() and t.dtype == torch.float32:
            state[key] = ("half", t.half())
            seen[(key, tuple(t.shape))] = (name, t)
        else:
            state[key] = ("as-is", t)
    packed[name] = {**ckpt, "state_dict": state}
torch.save(packed, dest + ".partial")
os.replace(dest + ".partial", dest)
EOF
  du -sh "$PACK"/*
  exit 0
fi

OUT=${OUT:?set OUT to the folder for the results}
DEVICE=${DEVICE:-cuda}
ENVS=${ENVS:-1}
SEEDS=${SEEDS:-1 2 3 4 5}
AGENTS=${AGENTS-ppgta ppgta-episodic episodic ppgta-episodic-step inspector random}
LEVEL_AGENTS=${LEVEL_AGENTS:-ppgta ppgta-episodic-step inspector random}
LEVELS=${LEVELS-doom:freedoom2:MAP01 doom:freedoom2:MAP07}
PARK=${PARK:-doom:park:1:40x40}
PARK_EPISODES=${PARK_EPISODES:-18}
PARK_STEPS=${PARK_STEPS:-500}
PARK_LIMIT=${PARK_LIMIT:-130}
LEVEL_EPISODES=${LEVEL_EPISODES:-10}
LEVEL_STEPS=${LEVEL_STEPS:-400}
LEVEL_LIMIT=${LEVEL_LIMIT:-80}
WORK=${WORK:-/tmp/device-explorer}
CORES=$(nproc)
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
mkdir -p "$OUT"
rm -rf "$WORK"
mkdir -p "$WORK/models" "$WORK/site"
REPORT="$OUT/explorer.txt"
: >"$REPORT"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  echo "cores $CORES, memory $(free -g | awk '/Mem/ {print $2}') GB, $($PY --version 2>&1), commit $(git rev-parse --short HEAD 2>/dev/null)"
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
} >"$OUT/env.txt" 2>&1

# The packages the image lacks, and the models as float32 checkpoints again.
if [ -f "$PACK/site.tar.xz" ]; then
  xz -dc "$PACK/site.tar.xz" | tar -C "$WORK/site" -xf - || { echo "unpacking $PACK/site.tar.xz failed" >>"$OUT/env.txt"; exit 1; }
  export PYTHONPATH="$WORK/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
if [ -n "${MODELS:-}" ]; then
  WORK_MODELS=$MODELS
else
  WORK_MODELS=$WORK/models
  $PY - "$PACK/models.pt" "$WORK_MODELS" <<'EOF' || { echo "unpacking $PACK/models.pt failed (run: scripts/device_explorer.sh prepare MODELS, here)" >>"$OUT/env.txt"; cat "$OUT/env.txt"; exit 1; }
import os, sys, torch
packed = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
for name, ckpt in packed.items():
    state = {}
    for key, (how, value) in ckpt["state_dict"].items():
        if how == "same":
            value = packed[value]["state_dict"][key][1]
        state[key] = value.float() if how in ("half", "same") else value
    torch.save({**ckpt, "state_dict": state}, os.path.join(sys.argv[2], f"{name}.ckpt"))
EOF
fi
$PY -c "import vizdoom, gymnasium, playtester; print('vizdoom', vizdoom.__version__, 'gymnasium', gymnasium.__version__)" >>"$OUT/env.txt" 2>&1 \
  || { echo "the packages are not importable" >>"$OUT/env.txt"; cat "$OUT/env.txt"; exit 1; }

# run_for SECONDS LOG COMMAND...: the command in a process group of its own, ended (with every
# run and game it started) after SECONDS; its output appended to LOG.
run_for() {
  local seconds=$1 log=$2
  shift 2
  setsid "$@" >>"$log" 2>&1 &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$seconds" ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null; sleep 3; kill -KILL -- "-$pid" 2>/dev/null
    echo "stopped at its limit, ${seconds} s" >>"$log"
  fi
  wait "$pid" 2>/dev/null
  return 0
}

# steps_per_second FOLDER SECONDS: the game steps every run folder under FOLDER logged, over SECONDS.
steps_per_second() {
  local steps
  steps=$(cat "$1"/*-seed*/trajectory.jsonl 2>/dev/null | wc -l)
  echo "steps/s: $steps game steps in $2 s, $(awk "BEGIN {printf \"%.1f\", $steps / $2}") a second over all runs ($(ls -d "$1"/*-seed* 2>/dev/null | wc -l) runs)"
}

n_runs() { set -- $1; local a=$#; set -- $SEEDS; echo $((a * $#)); }

common=(--models "$WORK_MODELS" --seeds $SEEDS --envs "$ENVS" --device "$DEVICE" --threads 1)
if [ -n "$AGENTS" ]; then
  echo "== park $PARK: $PARK_EPISODES episodes × $PARK_STEPS steps, seeds $SEEDS, agents $AGENTS, device $DEVICE, limit $PARK_LIMIT s" | tee -a "$REPORT"
  start=$(date +%s)
  run_for "$PARK_LIMIT" "$OUT/park.log" $PY scripts/bench_agents.py "${common[@]}" --game "$PARK" --episodes "$PARK_EPISODES" \
    --steps "$PARK_STEPS" --agents $AGENTS --parallel "$(n_runs "$AGENTS")" --out "$WORK/park"
  steps_per_second "$WORK/park" "$(( $(date +%s) - start ))" | tee -a "$REPORT"
  $PY scripts/bench_agents.py --cut max --parallel "$CORES" --out "$WORK/park" >>"$REPORT" 2>&1
fi

[ -n "$LEVELS" ] && echo "== levels $LEVELS: $LEVEL_EPISODES episodes × $LEVEL_STEPS steps, rules immortal, agents $LEVEL_AGENTS, limit $LEVEL_LIMIT s" | tee -a "$REPORT"
start=$(date +%s)
pids=()
for level in $LEVELS; do
  run_for "$LEVEL_LIMIT" "$OUT/levels.log" $PY scripts/bench_agents.py "${common[@]}" --profile levels --levels "$level" \
    ${LEVEL_PREFERENCE:+--preference "$LEVEL_PREFERENCE"} --episodes "$LEVEL_EPISODES" --steps "$LEVEL_STEPS" \
    --agents $LEVEL_AGENTS --parallel "$(n_runs "$LEVEL_AGENTS")" --out "$WORK/levels" &
  pids+=($!)
done
[ -n "$LEVELS" ] && wait "${pids[@]}"
for level in $LEVELS; do
  echo -n "$level " | tee -a "$REPORT"
  steps_per_second "$WORK/levels/$(echo "$level" | tr ':/' '__')" "$(( $(date +%s) - start ))" | tee -a "$REPORT"
done
# every level's runs at the same N, with Mann–Whitney per level
[ -n "$LEVELS" ] && $PY scripts/bench_agents.py --profile levels --cut max --parallel "$CORES" --out "$WORK/levels" >>"$REPORT" 2>&1

tar -C "$WORK" --exclude='*-seed*' -cf - park levels 2>/dev/null | xz -1 >"$OUT/results.tar.xz"
cat "$REPORT"
