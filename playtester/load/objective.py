"""`playtester run load`: the run's threshold and the load reward on its explorer.

The threshold `t_b` is read from `--load-threshold FILE`, or measured first by random play on a
fresh game instance (RELINE measured it with an agent trained to play; random play stands in),
and saved as `load_threshold.json` in the run folder, where a resumed run and the report find it.
At training start, the first rollout's steps are the warm-up that shifts it by the quartile rule;
the shifted threshold replaces the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playtester.errors import UserError

THRESHOLD_FILE = "load_threshold.json"
BASELINE_EPISODES = 2
"""Random episodes that measure `t_b` when no threshold file is given."""


def run_threshold(spec: Any):
    """The run's `LoadThreshold`: its own saved file, else `--load-threshold`, else measured now."""
    from playtester.load.reward import LoadThreshold
    from playtester.load.agent import measure_baseline

    saved = Path(spec.run_dir) / THRESHOLD_FILE
    if saved.exists():
        return LoadThreshold.load(saved)
    if spec.load_threshold:
        threshold = LoadThreshold.load(spec.load_threshold)
    else:
        threshold = measure_baseline(spec.game, BASELINE_EPISODES, spec.steps, seed=spec.seed + 7)
    threshold.save(saved)
    return threshold


def load_objective(run: Any, explorer: Any) -> Any:
    """`explorer` with RELINE's load reward around its reward hook (see the module doc); `run`:
    the run assembled (`playtester/tester/assemble.py`), whose probe gives the park's pathways."""
    from playtester.load.reward import AreaMask, LoadRewardConfig
    from playtester.load.agent import with_load_reward

    spec, area = run.spec, None
    if spec.load_area == "pathways":
        layout = run.game.layout
        if layout is None:
            raise UserError(f"--load-area pathways: {spec.game} has no pathway map; use --load-area everywhere")
        area = AreaMask.pathways(layout)
    config = LoadRewardConfig(warmup_steps=spec.rollout)
    saved = Path(spec.run_dir) / THRESHOLD_FILE
    return with_load_reward(explorer, run_threshold(spec), config, area=area, game=spec.game, on_shift=lambda t: t.save(saved))
