#!/bin/bash
# Issue 37's levels benchmark on a machine with one NVIDIA GPU and 16 cores (docs/benchmarks/levels.md):
# Freedoom 2 MAP01, MAP07, MAP10 and Freedoom 1 E1M2 under immortal rules, 5 seeds, the agents
# ppgta (its preference a path policy trained on level-walk demos of OTHER levels), inspector,
# and random (the level-walk expert, the ceiling, is cheap enough for the CPU box at the whole budget:
# AGENTS="ppgta inspector random expert" adds it here, and the cut then waits for it too).
#
# 1. The preference, unless one is brought (PREFERENCE=FILE, or `prepare` below): the level-walk
#    expert's demos on Freedoom 2 MAP02, MAP03, MAP04 and Freedoom 1 E1M1 (DEMO_EPISODES a level ×
#    DEMO_STEPS, DEMO_PARTS processes a level), `train encoder` (ENCODER_EPOCHS) and `train policy`
#    (POLICY_EPOCHS) on them, as a user would (README, "Any level"); about 2 to 3 minutes.
# 2. Every run at once (each its own `bench_agents.py --profile levels` process; the PPO agents'
#    networks on the GPU), all stopped after LIMIT seconds, every run scored at the most whole
#    episodes EVERY run played (`--cut max`: one fixed budget for all agents, the limit only decides
#    which), with Mann–Whitney U per level; the runs of expert and random that played their whole
#    budget (EPISODES × STEPS) are also scored there.
#
# There, from the repository root (the run tool: carry [".device-levels"], timeout_s 540; about 6
# minutes: 2 to 3 for the preference, LIMIT for the runs, under a minute to score them):
#   OUT=/some/folder scripts/device_levels.sh
# writes $OUT/levels.txt (the tables, the tests, the steps/s of each agent), $OUT/env.txt,
# $OUT/train.log, $OUT/runs.log and $OUT/results.tar.xz (levels.json of each table, each cut run's
# summary.json and the coverage maps of seed 1). The issue's whole budget (10 × 1000 for every
# agent) needs LIMIT from the steps/s lines: 10 000 steps over the slowest agent's steps/s a run.
# Settings: LIMIT (150 s), LEVELS, AGENTS, SEEDS (1 2 3 4 5), EPISODES (10), STEPS (1000), RULES
# (immortal; play: the issue's second table), ENVS (2, the PPO agents' game instances), DEVICE
# (cuda; cpu for a dry run), WORK, and those of step 1.
#
# Here, once (pip downloads ViZDoom 1.3.2, Gymnasium 1.4.0 and Farama-Notifications for Python
# 3.12, which the machine's image lacks; both Freedoom WADs; about 26 MB):
#   scripts/device_levels.sh prepare [PREFERENCE.ckpt]
# writes .device-levels/ (git-ignored; carry it): site.tar.xz and, given a preference,
# preference.pt (the checkpoint in float16, about 21 MB, restored to float32 there; step 1 is skipped).
# A dry run here, without a GPU or the pack:
#   DEVICE=cpu LEVELS=doom:freedoom2:MAP01 SEEDS=1 AGENTS="ppgta random" EPISODES=2 STEPS=40 LIMIT=200 \
#   DEMO_LEVELS="doom:freedoom2:MAP02 doom:freedoom1:E1M1" DEMO_EPISODES=3 DEMO_PARTS=1 DEMO_STEPS=40 \
#   ENCODER_EPOCHS=1 POLICY_EPOCHS=1 ENCODER_OPTIONS="--image-size 64 --feature-dim 32" \
#   POLICY_OPTIONS="--global-hidden 32 --local-hidden 16" OUT=/tmp/dl scripts/device_levels.sh   (about 2 minutes)
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PACK=${PACK:-.device-levels}

if [ "${1:-}" = prepare ]; then
  PREFERENCE=${2:-}
  [ -z "$PREFERENCE" ] || [ -f "$PREFERENCE" ] || { echo "error: $PREFERENCE is missing; give a path policy trained on level-walk demos, or none (it is trained there)" >&2; exit 2; }
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qx "/$PACK/" "$exclude" 2>/dev/null || echo "/$PACK/" >>"$exclude"
  mkdir -p "$PACK"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$tmp/whl" vizdoom==1.3.2 gymnasium==1.4.0 farama-notifications==0.0.6 || exit 1
  mkdir "$tmp/site"
  for w in "$tmp"/whl/*.whl; do (cd "$tmp/site" && unzip -q -o "$w") || exit 1; done
  tar -C "$tmp/site" -cf - . | xz -6 -T0 >"$PACK/site.tar.xz.partial" && mv "$PACK/site.tar.xz.partial" "$PACK/site.tar.xz" || exit 1
  rm -f "$PACK/preference.pt"
  [ -z "$PREFERENCE" ] || $PY - "$PREFERENCE" "$PACK/preference.pt" <<'EOF' || exit 1
import os, sys, torch
ckpt = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
ckpt["state_dict"] = {k: t.half() if t.is_floating_point() and t.dtype == torch.float32 else t for k, t in ckpt["state_dict"].items()}
ckpt["float16_of_float32"] = True
torch.save(ckpt, sys.argv[2] + ".partial")
os.replace(sys.argv[2] + ".partial", sys.argv[2])
EOF
  du -sh "$PACK"/*
  exit 0
fi

OUT=${OUT:?set OUT to the folder for the results}
DEVICE=${DEVICE:-cuda}
LEVELS=${LEVELS:-doom:freedoom2:MAP01 doom:freedoom2:MAP07 doom:freedoom2:MAP10 doom:freedoom1:E1M2}
AGENTS=${AGENTS:-ppgta inspector random}
SEEDS=${SEEDS:-1 2 3 4 5}
EPISODES=${EPISODES:-10}
STEPS=${STEPS:-1000}
ENVS=${ENVS:-2}
RULES=${RULES:-immortal}
LIMIT=${LIMIT:-150}
DEMO_LEVELS=${DEMO_LEVELS:-doom:freedoom2:MAP02 doom:freedoom2:MAP03 doom:freedoom2:MAP04 doom:freedoom1:E1M1}
DEMO_EPISODES=${DEMO_EPISODES:-6}
DEMO_PARTS=${DEMO_PARTS:-3}
DEMO_STEPS=${DEMO_STEPS:-400}
ENCODER_EPOCHS=${ENCODER_EPOCHS:-3}
POLICY_EPOCHS=${POLICY_EPOCHS:-8}
ENCODER_OPTIONS=${ENCODER_OPTIONS:-}
POLICY_OPTIONS=${POLICY_OPTIONS:-}
WORK=${WORK:-/tmp/device-levels}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
mkdir -p "$OUT"
rm -rf "$WORK"
mkdir -p "$WORK/site" "$WORK/parts" "$WORK/levels" "$WORK/whole"
REPORT="$OUT/levels.txt"
: >"$REPORT"
: >"$OUT/runs.log"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  echo "cores $(nproc), memory $(free -g | awk '/Mem/ {print $2}') GB, $($PY --version 2>&1), commit $(git rev-parse --short HEAD 2>/dev/null)"
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
} >"$OUT/env.txt" 2>&1
if [ -f "$PACK/site.tar.xz" ]; then
  xz -dc "$PACK/site.tar.xz" | tar -C "$WORK/site" -xf - || { echo "unpacking $PACK/site.tar.xz failed" | tee -a "$OUT/env.txt"; exit 1; }
  export PYTHONPATH="$WORK/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
PREFERENCE=${PREFERENCE:-$WORK/preference.ckpt}
if [ ! -f "$PREFERENCE" ] && [ -f "$PACK/preference.pt" ]; then
  $PY - "$PACK/preference.pt" "$PREFERENCE" <<'EOF' || { echo "unpacking $PACK/preference.pt failed (run here: scripts/device_levels.sh prepare PATH.ckpt)" | tee -a "$OUT/env.txt"; exit 1; }
import os, sys, torch
ckpt = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
if ckpt.pop("float16_of_float32", False):
    ckpt["state_dict"] = {k: t.float() if t.dtype == torch.float16 else t for k, t in ckpt["state_dict"].items()}
torch.save(ckpt, sys.argv[2])
EOF
fi
$PY -c "import vizdoom, gymnasium, playtester.cli; print('vizdoom', vizdoom.__version__, 'gymnasium', gymnasium.__version__)" >>"$OUT/env.txt" 2>&1 \
  || { echo "the packages are not importable" | tee -a "$OUT/env.txt"; exit 1; }

runs=0; need=0  # memory: about 2 GB a PPO run (torch, CUDA, two games), 0.8 GB another; refused before any work past 90 %
for agent in $AGENTS; do
  case $agent in ppgta|inspector) mb=2000 ;; *) mb=800 ;; esac
  k=$(($(echo $LEVELS | wc -w) * $(echo $SEEDS | wc -w)))
  runs=$((runs + k)); need=$((need + k * mb))
done
have=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
if [ "$need" -gt $((have * 9 / 10)) ]; then
  echo "error: $runs runs at once need about $((need / 1000)) GB, the machine has $((have / 1000)) GB available; give fewer AGENTS, SEEDS or LEVELS" | tee -a "$REPORT"
  exit 2
fi

if [ ! -f "$PREFERENCE" ]; then  # none brought: level-walk demos of other levels, the encoder and the path policy, here
  begin=$(date +%s)
  mkdir -p "$WORK/demos" "$WORK/models"
  echo "== preference: $DEMO_EPISODES level-walk episodes × $DEMO_STEPS steps on each of $DEMO_LEVELS, encoder $ENCODER_EPOCHS epochs, policy $POLICY_EPOCHS epochs" >>"$REPORT"
  i=0
  for level in $DEMO_LEVELS; do
    for part in $(seq 1 "$DEMO_PARTS"); do  # each level's episodes in DEMO_PARTS processes
      i=$((i + 1))
      $PY -m playtester demos --game "$level" --behavior path --episodes $((DEMO_EPISODES / DEMO_PARTS)) --steps "$DEMO_STEPS" \
        --seed $((1000 * i)) --out "$WORK/demos/$i" >"$WORK/demos-$i.log" 2>&1 &
    done
  done
  wait
  $PY -m playtester train encoder --demos "$WORK/demos" --out "$WORK/models/encoder.ckpt" --epochs "$ENCODER_EPOCHS" --seed 0 \
    --pretrained none $ENCODER_OPTIONS >"$OUT/train.log" 2>&1 \
  && $PY -m playtester train policy --demos "$WORK/demos" --encoder "$WORK/models/encoder.ckpt" --out "$PREFERENCE" \
    --epochs "$POLICY_EPOCHS" --seed 0 $POLICY_OPTIONS >>"$OUT/train.log" 2>&1 \
  || { echo "training the preference failed: $(tail -1 "$OUT/train.log")" | tee -a "$REPORT"; tail -n 3 "$WORK"/demos-*.log >>"$REPORT"; exit 1; }
  echo "$(ls -d "$WORK"/demos/*/ep* | wc -l) demo episodes; the preference in $(($(date +%s) - begin)) s" >>"$REPORT"
  grep -E "held-out" "$OUT/train.log" >>"$REPORT"
fi

echo "== $LEVELS: $EPISODES episodes × $STEPS steps, rules $RULES, seeds $SEEDS, agents $AGENTS, device $DEVICE, limit $LIMIT s" >>"$REPORT"
pids=()
n=0
start=$(date +%s)
for level in $LEVELS; do
  for seed in $SEEDS; do
    for agent in $AGENTS; do
      n=$((n + 1))
      case $agent in ppgta|inspector) device=$DEVICE ;; *) device=cpu ;; esac
      setsid $PY scripts/bench_agents.py --profile levels --levels "$level" --agents "$agent" --seeds "$seed" \
        --episodes "$EPISODES" --steps "$STEPS" --rules "$RULES" --envs "$ENVS" --preference "$PREFERENCE" --device "$device" --threads 1 \
        --out "$WORK/parts/$n" >"$WORK/parts/$n.log" 2>&1 &
      pids+=($!)
    done
  done
done
while [ $(($(date +%s) - start)) -lt "$LIMIT" ]; do
  running=0
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=$((running + 1)); done
  [ "$running" -eq 0 ] && break
  sleep 2
done
stopped=0
for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && { stopped=$((stopped + 1)); kill -TERM -- "-$pid" 2>/dev/null; }; done
sleep 3
for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
wait 2>/dev/null
seconds=$(($(date +%s) - start))
echo "$n runs, $stopped stopped at the limit, $seconds s" >>"$REPORT"
for i in $(seq 1 "$n"); do { echo "-- run $i"; tail -n 3 "$WORK/parts/$i.log"; } >>"$OUT/runs.log"; done

for run in "$WORK"/parts/*/*/*-seed*; do  # parts/N/LEVEL/AGENT-seedS -> levels/LEVEL/AGENT-seedS
  level=$(basename "$(dirname "$run")")
  mkdir -p "$WORK/levels/$level"
  mv "$run" "$WORK/levels/$level/"
done
for agent in $AGENTS; do
  rows=$(cat "$WORK"/levels/*/"$agent"-seed*/trajectory.jsonl 2>/dev/null | wc -l)
  runs=$(ls -d "$WORK"/levels/*/"$agent"-seed* 2>/dev/null | wc -l)
  awk -v a="$agent" -v r="$rows" -v s="$seconds" -v n="$runs" \
    'BEGIN { printf "steps/s %s: %d steps in %d s over %d runs, %.1f a second a run\n", a, r, s, n, n ? r / s / n : 0 }' >>"$REPORT"
done

echo "== every agent at the most whole episodes every run played" >>"$REPORT"
$PY scripts/bench_agents.py --profile levels --cut max --parallel "$(nproc)" --out "$WORK/levels" >>"$REPORT" 2>&1
for run in "$WORK"/levels/*/expert-seed* "$WORK"/levels/*/random-seed*; do  # the whole runs of the cheap agents
  [ -d "$run" ] || continue
  level=$(basename "$(dirname "$run")")
  mkdir -p "$WORK/whole/$level"
  ln -s "$run" "$WORK/whole/$level/"
done
echo "== expert and random at their whole budget, $EPISODES × $STEPS (where every run of theirs played it)" >>"$REPORT"
$PY scripts/bench_agents.py --profile levels --cut "$EPISODES" --parallel "$(nproc)" --out "$WORK/whole" >>"$REPORT" 2>&1

(cd "$WORK" && find levels whole -path '*first-*' \( -name levels.json -o -name summary.json -o \( -path '*-seed1/*' -name coverage.png \) \) -print0 \
  | tar --null -T - -cf - | xz -1 >"$OUT/results.tar.xz")
cat "$REPORT"
