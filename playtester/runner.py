"""A tester run: one `TesterEnv` per game instance, driven by the explorer.

`RunSpec` holds what a game instance needs to build its tester loop (paths and options only, so
that it pickles into `AsyncVectorEnv`'s worker processes). Two drivers share it:

- `explore_with_ppo`: the PPO explorer, trained online while it plays (PPGTA's agent, `ppgta`,
  or the Inspector-style baseline, `inspector`), on `num_envs` game instances at once. Each
  instance is `make_game` → `TesterEnv` → the explorer's OD mask → resize; the tester loop sits
  under the explorer, so a whole OOI test is one explorer step. The run ends when every
  instance has played its share of the episode budget.
- `explore_at_random`: uniform random actions on one instance (the random baseline), no
  learning.

Both write to the same run folder in the same formats, so reports and benchmarks compare them.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np

from playtester.capture.errors import UserError
from playtester.capture.yamlfile import read_json
from playtester.object_source import FOUND_BY_KEY, NO_OBJECTS, check_object_source, object_source
from playtester.tester import TesterConfig, TesterEnv

EXPLORERS = ("ppgta", "inspector", "random")
OBJECTIVES = ("coverage", "load")
"""`ppgta`: RND novelty + the path policy's preference; `inspector`: single-predictor RND only;
`random`: uniform random actions."""


@dataclass
class RunSpec:
    """Everything a game instance needs to build its tester loop; saved as the run's config."""

    game: str
    """Game spec (see `playtester games`)."""
    tester: str | None
    """Test policy checkpoint (the inspect policy); None: explore and watch the oracles only."""
    run_dir: str
    """The run folder."""
    explorer: str = "ppgta"
    """One of `EXPLORERS`."""
    preference: str | None = None
    """Path-following policy checkpoint: the preference reward (ppgta) and the explorer's initial weights."""
    detector: str | None = None
    """Detector checkpoint that finds the OOIs to test (needed with a test policy, unless `oracle_labels`)."""
    oracle_labels: bool = False
    """Find the OOIs through the engine's labels instead of a detector (the park only): an ablation."""
    episodes: int = 3
    """Episodes in the whole run, each from a random start."""
    steps: int = 500
    """Game steps per episode, test steps included."""
    num_envs: int = 2
    """Game instances played at once by the PPO explorer (the random explorer plays one)."""
    rollout: int = 64
    """PPO steps per instance between updates."""
    texture_reference: str | None = None
    """COCO labels of healthy OOIs for the texture oracle."""
    assertions: list[str] = field(default_factory=list)
    """User assertions, `module:function` or `file.py:function`."""
    stuck_steps: int = 40
    """Steps of unchanged picture under input that count as stuck."""
    test_steps: int | None = None
    """Steps of one OOI test; None: the test policy's demo length."""
    seed: int = 0
    """Seed of starts, action sampling and PPO."""
    map: str | None = None
    """Bird's-eye map image of a game without built-in ground truth (a window game), for the report."""
    map_bounds: list[float] | None = None
    """World bounds `x0, y0, x1, y1` the map image covers (telemetry units)."""
    oois: str | None = None
    """JSON file of the known OOIs (`id`, `kind`, `x`, `y`): detections are matched to them by
    telemetry, and the report draws them."""
    telemetry_port: int | None = None
    """A window game's UDP telemetry port (its dev build sends position, angle, fps there)."""
    objective: str = "coverage"
    """`coverage`: the explorer's own reward; `load`: plus RELINE's load reward for frame-rate drops."""
    load_threshold: str | None = None
    """With `load`: a threshold file (`LoadThreshold.save`); None: measured by random play first,
    saved as `load_threshold.json` in the run folder."""
    load_area: str = "everywhere"
    """With `load`: where frame-rate drops are rewarded, `everywhere` or `pathways` (the park's)."""
    max_restarts: int = 3
    """Game crashes in the run that are restarted from; one more stops the run (the report says why)."""

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise UserError(f"--objective {self.objective!r}: use one of {', '.join(OBJECTIVES)}")
        if self.objective == "load" and self.explorer == "random":
            raise UserError("--objective load trains the PPO explorer; use --explorer inspector or ppgta "
                            "(a random run's report shows its frame times anyway)")
        if self.load_area not in ("everywhere", "pathways"):
            raise UserError(f"--load-area {self.load_area!r}: use everywhere or pathways")
        if self.explorer not in EXPLORERS:
            raise UserError(f"--explorer {self.explorer!r}: use one of {', '.join(EXPLORERS)}, evolve")
        if self.explorer == "ppgta" and not self.preference:
            raise UserError("--explorer ppgta needs the path-following policy: give --preference models/path.ckpt "
                            "(or --explorer inspector|random)")
        for name in ("episodes", "steps", "num_envs", "rollout", "stuck_steps"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be at least 1")
        if self.max_restarts < 0:
            raise UserError(f"--max-restarts {self.max_restarts}: must be 0 (stop at the first crash) or more")
        if self.explorer == "random" or self.game.startswith("window:"):
            self.num_envs = 1  # one random walker; one window on the desktop
        if (self.map is None) != (self.map_bounds is None):
            raise UserError("--map and --map-bounds go together: the image, and the world area it shows")
        if self.map is not None:
            check_map(self.map, self.map_bounds)
        if self.oois is not None:
            load_known_oois(self.oois)
        if self.telemetry_port is not None and not self.game.startswith("window:"):
            raise UserError(f"--telemetry-port: only a window game listens for telemetry; {self.game} reports its own")
        check_object_source(self.detector, self.oracle_labels, needed=self.tester is not None,
                            needed_by=f"--tester {self.tester}")

    def game_options(self) -> dict[str, Any]:
        """What `make_game` takes for this run's game."""
        options: dict[str, Any] = {"max_steps": self.steps}
        if self.telemetry_port is not None:
            options["telemetry_port"] = self.telemetry_port
        return options

    def to_config(self) -> dict[str, Any]:
        config = asdict(self)
        config["agent"] = {"ppgta": "PPGTA explorer", "inspector": "Inspector-style explorer",
                           "random": "random explorer"}[self.explorer]
        if self.objective == "load":
            config["agent"] += " + load reward"
        config[FOUND_BY_KEY] = object_source(self.detector, self.oracle_labels) if self.tester else NO_OBJECTS
        return config


class KnownOOI(NamedTuple):
    """An object of interest whose place the tester knows (from `--oois`)."""

    id: Any
    kind: str
    x: float
    y: float


def load_known_oois(path: str | Path) -> list[KnownOOI]:
    """The `--oois` file: a JSON list of `{"id", "kind", "x", "y"}` (more keys are kept for the report)."""
    if not Path(path).exists():
        raise UserError(f"--oois {path}: no such file")
    records = read_json(path, f"--oois {path}")
    if not isinstance(records, list):
        raise UserError(f"--oois {path}: expected a JSON list of objects with id, kind, x, y")
    oois = []
    for i, r in enumerate(records):
        try:
            oois.append(KnownOOI(r["id"], str(r["kind"]), float(r["x"]), float(r["y"])))
        except (KeyError, TypeError, ValueError):
            raise UserError(f"--oois {path}: record {i} ({json.dumps(r)[:80]}) needs id, kind and numeric x, y") from None
    if len({o.id for o in oois}) != len(oois):
        raise UserError(f"--oois {path}: two records share an id; ids must be unique")
    return oois


def check_map(image: str, bounds: list[float] | None) -> None:
    """Refuse an unreadable `--map` image or `--map-bounds` that enclose no area."""
    import cv2

    if cv2.imread(str(image)) is None:
        raise UserError(f"--map {image}: missing or not an image (PNG or JPEG)")
    if bounds is None or len(bounds) != 4 or not (bounds[2] > bounds[0] and bounds[3] > bounds[1]):
        raise UserError(f"--map-bounds {bounds}: give X0,Y0,X1,Y1 (world units) with X1 > X0 and Y1 > Y0")


def make_detector(spec: RunSpec, env: gym.Env):
    """What finds the OOIs in the tester loop: a trained model whose detections are matched to
    the known OOIs (the park's, or `--oois`) by telemetry, or with `oracle_labels` the engine's
    labels; None without a test policy (nothing to test with)."""
    from playtester.tester import GroundTruthDetector, ModelDetector

    if spec.tester is None:
        return None
    layout = getattr(getattr(env.unwrapped, "scenario", None), "layout", None)
    if spec.oracle_labels:
        if layout is None:
            raise UserError(f"--oracle-labels: {spec.game} has no engine labels to find objects with (only the built-in "
                            "park has); give --detector with a trained detector checkpoint")
        return GroundTruthDetector()
    from playtester.capture.level_map import level_objects
    from playtester.perception.detector import load_detector

    model = load_detector(spec.detector)
    # the objects it can place by telemetry: the park's OOIs, --oois, or a Doom level's things of its classes
    known = layout.oois if layout else load_known_oois(spec.oois) if spec.oois else level_objects(spec.game, model.classes)
    return ModelDetector(model, known)


def tester_env(spec: RunSpec, env: gym.Env, index: int = 0) -> TesterEnv:
    """Game instance `index` inside its tester loop, carrying on the run folder's logs."""
    import torch

    from playtester.imitation.live import load_policy
    from playtester.oracles import AssertionOracle, CrashOracle, StuckOracle, TextureOracle, load_assertion

    torch.set_num_threads(1)  # one game instance a process: more threads only fight each other
    live = load_policy(spec.tester) if spec.tester else None
    texture = TextureOracle.from_coco(spec.texture_reference) if spec.texture_reference else None
    oracles = [CrashOracle(), StuckOracle(spec.stuck_steps), AssertionOracle([load_assertion(a) for a in spec.assertions])]
    wrapped = TesterEnv(
        env, tester=live, detector=make_detector(spec, env), oracles=oracles, run_dir=spec.run_dir, game=spec.game,
        game_options=spec.game_options(), texture=texture,
        config=TesterConfig(test_steps=spec.test_steps, seed=spec.seed), env_index=index, n_envs=spec.num_envs,
        episodes=spec.episodes, max_restarts=spec.max_restarts,
    )
    wrapped.continue_run()
    return wrapped


def _wrap(spec: RunSpec, env: gym.Env, index: int) -> gym.Env:
    return tester_env(spec, env, index)


def episodes_left(spec: RunSpec) -> int:
    """Episodes of the budget not yet started in the run folder."""
    from playtester.runlog import read_jsonl

    played = {r["episode"] for r in read_jsonl(Path(spec.run_dir) / "trajectory.jsonl")}
    return max(0, spec.episodes - len(played))


def explore_at_random(spec: RunSpec, progress: Callable[[int], None] = lambda n: None,
                      say: Callable[[str], None] = print) -> None:
    """The random baseline on one game instance; `progress(n)` after each episode. A crashed
    game is started again (`TesterEnv`) until `max_restarts` is spent; then the run ends here,
    and says why."""
    from playtester.capture.games import make_game
    from playtester.crashes import clear_stop

    clear_stop(Path(spec.run_dir))
    env = tester_env(spec, make_game(spec.game, **spec.game_options()))
    rng = np.random.default_rng(spec.seed + 1 + env.local_episode)
    first = env.episode + env.n_envs
    try:
        while True:
            env.reset()
            if env.stopped is not None:
                say(f"the run stops: {env.stopped}")
                return
            if env.idle:
                return
            for _ in range(spec.steps):
                _, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
                if info.get("crashed"):
                    say(f"the game crashed in episode {env.episode}: {info.get('crash_reason') or 'the game is gone'}")
                if terminated or truncated:
                    break
            progress(env.episode + 1 - first)
    finally:
        env.close()


def all_idle(infos: dict[str, Any]) -> bool:
    """`stop` for PPO: every instance has played its share of the budget."""
    idle = infos.get("tester_idle")
    return idle is not None and bool(np.all(idle))


def run_stopped(infos: dict[str, Any]) -> bool:
    """`stop` for PPO: an instance's game crashed beyond the restart budget (`TesterEnv`)."""
    mask = infos.get("_run_stopped")
    return mask is not None and bool(np.any(mask))


def explore_with_ppo(spec: RunSpec, progress: Callable[[int], None] = lambda n: None, resume: bool = False,
                     cluster: bool = False):
    """Train the PPO explorer online while it plays the run's episodes; see the module doc. With
    `cluster`, the game instances run as Ray actors (Ray started already; `playtester/cluster.py`)."""
    import functools

    from playtester.exploration.checkpoints import load_checkpoint
    from playtester.exploration.explorer import build_explorer
    from playtester.exploration.ppo import CHECKPOINT_NAME, train

    from playtester.crashes import clear_stop

    clear_stop(Path(spec.run_dir))
    explorer_dir = Path(spec.run_dir) / "explorer"
    checkpoint = explorer_dir / "checkpoints" / CHECKPOINT_NAME
    resume_ppo = resume and checkpoint.exists()
    saved = load_checkpoint(checkpoint) if resume_ppo else None
    trained = saved["global_step"] if saved else 0
    per_env = math.ceil(episodes_left(spec) / spec.num_envs)
    # An upper bound: a test takes many game steps but counts as one explorer step; `all_idle` ends the run.
    budget = trained + spec.num_envs * (per_env * spec.steps + 2 * spec.rollout)
    if saved:  # a resumed PPO run may not shrink its budget (its learning-rate schedule hangs on it)
        budget = max(budget, int(saved["config"]["total_timesteps"]))
    wrap: Callable[[gym.Env, int], gym.Env] = functools.partial(_wrap, spec)
    if cluster:
        from playtester.cluster import ray_instances, tester_on_worker

        wrap = tester_on_worker  # in an actor: the tester loop on its scratch copy of the run folder
    explorer = build_explorer(
        spec.game, spec.preference, spec.explorer, run_dir=str(explorer_dir), total_timesteps=budget,
        num_envs=spec.num_envs, num_steps=spec.rollout, seed=spec.seed, checkpoint_every=5, resume=resume_ppo,
        game_options=spec.game_options(), wrap=wrap,
    )
    if cluster:  # the same instances, each in a Ray actor; this process alone writes the run folder
        explorer = explorer._replace(env_fn=ray_instances(spec, explorer.env_fn))
    if spec.objective == "load":
        from playtester.load_objective import load_objective

        explorer = load_objective(spec, explorer)

    ended = 0

    def stop(infos: dict[str, Any]) -> bool:
        nonlocal ended
        if "_final_obs" in infos and infos["_final_obs"].any():
            ended += int(np.sum(infos["_final_obs"]))  # idle instances' ends too: the bar is capped at the budget
            progress(ended)
        return all_idle(infos) or run_stopped(infos)

    return train(*explorer, stop=stop)
