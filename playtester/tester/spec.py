"""What one tester run is: `RunSpec`, its command line, its saved config.yaml and its resume
check in one dataclass, with the checks of the files it names.

Light on purpose (no torch, no engine): `playtester --help` builds every `run` subcommand's
options from it.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

from playtester.errors import UserError
from playtester.files import read_json
from playtester.commands.options import MANY
from playtester.tester.object_source import FOUND_BY_KEY, NO_OBJECTS, check_object_source, object_source

EXPLORERS = ("ppgta", "ppgta-episodic", "episodic", "inspector", "random")
"""`ppgta`: RND novelty + the path policy's preference; `ppgta-episodic`: that + E3B's elliptical
episodic bonus; `episodic`: the episodic bonus + the preference, no RND; `inspector`:
single-predictor RND only; `random`: uniform random actions (`exploration/modes.py`)."""
NEEDS_PATH_POLICY = ("ppgta", "ppgta-episodic", "episodic")
"""The explorers rewarded with the path policy's preference (and read its encoder's features)."""
NOVELTY_SCALES = ("return", "step")
"""What the explorer's novelties are divided by (`ExplorationRewardConfig.novelty_scale`)."""
OBJECTIVES = ("coverage", "load")
DEVICES = ("cpu", "cuda")
"""Where a run's networks run (`--device`); the games always play on the CPU."""
ACTING = ("fp32", "int8")
"""The precision of the networks that play (`acting`): the PPO explorer's decisions (it always
learns in fp32) and the test policy's steps."""


@dataclass(frozen=True)
class Flag:
    """How a `RunSpec` field is given on the command line (`playtester/commands/run.py` builds
    each `run` subcommand's options from these)."""

    name: str
    """The option, e.g. `--envs`."""
    help: str
    kept: bool = False
    """A resumed run must keep it: the logs and the explorer's checkpoint were made with it."""
    limits: tuple[int | None, int | None] = (None, None)
    """`min`, `max` of a count."""


def flag(name: str, help: str, default: Any = MISSING, *, kept: bool = False, limits: tuple[int | None, int | None] = (None, None),
         factory: Callable[[], Any] | None = None) -> Any:
    """A `RunSpec` field with its command-line option."""
    metadata = {"flag": Flag(name, help, kept, limits)}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(kw_only=True)
class RunSpec:
    """One tester run: its command line (each field's `Flag`), its saved config.yaml (`to_config`)
    and its resume check (the `kept` flags). Everything a game instance needs to build its tester
    loop: paths and options only, so that it pickles into the game workers."""

    game: str = flag("--game", "Game spec (see `playtester games`).", kept=True)
    tester: str | None = flag("--tester", "Test policy checkpoint (e.g. the inspect policy), with --detector to find the OOIs it tests; without it the run explores and watches the oracles, testing no OOI.", None, kept=True)
    run_dir: str = flag("--out", "Run folder, e.g. runs/r1 (refused if it exists, unless --resume or --overwrite).")
    explorer: str = flag("--explorer", "ppgta (PPO with RND novelty + the path policy's preference, trained online), ppgta-episodic (ppgta + E3B's elliptical episodic novelty on the path policy's inverse-dynamics features: what this episode has not seen yet), episodic (the episodic novelty + the preference, no RND), inspector (PPO with single-predictor RND, the baseline) or random; evolve is `playtester run evolve`.", "ppgta", kept=True)
    preference: str | None = flag("--preference", "Path-following policy checkpoint: the explorer starts from it and is rewarded for keeping its style (needed by --explorer ppgta, ppgta-episodic and episodic).", None, kept=True)
    rnd_weight: float | None = flag("--rnd-weight", "The weight of ensemble RND's novelty (global, across episodes) in the explorer's novelty; 0 leaves RND out; default: the --explorer's (1, or 0 for episodic).", None, kept=True, limits=(0, None))
    novelty_scale: str = flag("--novelty-scale", "What the explorer's novelties are divided by before they are mixed with the preference: return (the running std of their discounted sum, as CleanRL's RND: the novelty comes out about 1 % of PPGTA's reward, docs/benchmarks/explorer.md) or step (the running std of their per-step values: unit scale).", "return", kept=True)
    episodic_weight: float | None = flag("--episodic-weight", "The weight of E3B's elliptical episodic novelty (within the episode) in the explorer's novelty; 0 leaves it out; default: the --explorer's (1 for ppgta-episodic and episodic, else 0).", None, kept=True, limits=(0, None))
    detector: str | None = flag("--detector", "Detector checkpoint that finds the OOIs to test (from `playtester train detector`); a run with --tester refuses to start without it or --oracle-labels.", None, kept=True)
    oracle_labels: bool = flag("--oracle-labels", "Find the OOIs through the engine's labels instead of a detector (the built-in park only): an ablation, and the report says so.", False, kept=True)
    episodes: int = flag("--episodes", "Episodes in the whole run, each from a random start.", 3, limits=(1, MANY))
    steps: int = flag("--steps", "Game steps per episode (test steps included).", 500, kept=True, limits=(1, MANY))
    num_envs: int = flag("--envs", "Game instances played at once, one process each (the PPO explorer and evolve; random and window games play one).", 2, kept=True, limits=(1, 64))
    rollout: int = flag("--rollout", "PPO steps per game instance between updates.", 64, kept=True, limits=(1, MANY))
    seq_len: int = flag("--seq-len", "PPO's update takes each instance's rollout as sequences of this many steps, each from the recurrent state the rollout had there, several side by side in a minibatch (faster on a CPU, gradients through each sequence only); must divide --rollout; 0: whole rollouts.", 0, kept=True, limits=(0, MANY))
    rnd_train_steps: int = flag("--rnd-train-steps", "RND's predictor training steps after each rollout (each predictor on 128 frames drawn from a replay of the last 1024): fewer is faster (the largest part of a CPU run at 8) and lets novelty fade more slowly; 0 never trains them (their disagreement stays as initialised).", 8, kept=True, limits=(0, MANY))
    overlap_rnd: bool = flag("--overlap-rnd", "RND's predictors train in a thread of their own while the next rollout plays, instead of between rollouts while the games wait: the same training, finished before the next rollout's rewards need it, with a random generator of its own.", False)
    overlap_update: bool = flag("--overlap-update", "The explorer's PPO update runs in a thread of its own while the games play the next rollout, instead of between rollouts while they wait: each rollout is then played by the weights from before the update beside it, one update behind (as asynchronous PPO does).", False)
    texture_reference: str | None = flag("--texture-reference", "COCO labels of healthy OOIs for the texture oracle.", None)
    assertions: list[str] = flag("--assert", "A user assertion, module:function or file.py:function (repeatable).", factory=list)
    stuck_steps: int = flag("--stuck-steps", "Steps of unchanged picture under input that count as stuck.", 40, limits=(1, MANY))
    test_steps: int | None = flag("--test-steps", "Steps of one OOI test (default: the test policy's demo length).", None, limits=(1, MANY))
    min_score: float = flag("--min-score", "Detections below this confidence are not tested: each false detection tested costs a test's steps (docs/benchmarks/agents.md).", 0.6, limits=(0, 1))
    track_every: int = flag("--track-every", "During an OOI test, follow the OOI with the detector every this many steps (1: every step; more is faster, the box held in between).", 1, limits=(1, MANY))
    seed: int = flag("--seed", "Seed of starts, action sampling and PPO.", 0, kept=True, limits=(0, None))
    lockstep: bool = flag("--lockstep", "Step the game instances together, each waiting for the slowest (as before they ran free): for comparisons; a run on Ray always does.", False)
    device: str = flag("--device", "Where the networks run: cpu, or cuda (the explorer, its rewards, and every game instance's detector and test policy on the GPU; the games stay on CPU workers).", "cpu")
    acting: str = flag("--acting", "The networks that play, fp32 or int8: with int8 their encoders' convolutions run in int8 once they have seen the run's first 64 frames, and their GRUs and heads in int8 (the PPO explorer decides with such a copy of itself, made anew each rollout, and still learns in fp32); a decision or a test step in about half the time on a CPU (×0.48 on 2 cores), the actions within a few per cent of fp32's (docs/benchmarks/ppo-and-loop.md). CPU only.", "fp32")
    serve: bool = flag("--serve", "Serve every game instance's detector and test policy from one process, batched across the instances (on by itself with --device cuda and more than one instance).", False)
    map: str | None = flag("--map", "Bird's-eye map image of a game without built-in ground truth (a window game with telemetry).", None)
    map_bounds: list[float] | None = flag("--map-bounds", "X0,Y0,X1,Y1: the world area (telemetry units) the --map image shows.", None)
    oois: str | None = flag("--oois", "JSON list of the known OOIs ({id, kind, x, y}): detections are matched to them by telemetry and the report draws them.", None)
    telemetry_port: int | None = flag("--telemetry-port", "A window game's UDP port for JSON-line telemetry from its dev build (pos, angle, fps).", None, limits=(1, 65535))
    launch: str | None = flag("--launch", "The command that starts a window game, e.g. \"./MyGame -windowed\": playtester starts it, waits for its window (the title after window:), ends it with the run (also when playtester is killed) and starts it again after a crash (a crash finding; the run goes on).", None)
    reset: str | None = flag("--reset", "A window game's reset recipe, played before every episode and after a game over, outside the episode's steps: a reset plan (YAML: keys, waits, until a screenshot matches) or the keys themselves, e.g. \"y 10 down enter 20\" (a number waits that many steps). See docs/your-own-game.md.", None)
    out_of_play: list[str] = flag("--out-of-play", "A screenshot of a window game's screen that is not play (game over, a menu; repeatable): a frame that matches one ends the episode, and the reset recipe runs. Without one, with --reset, a picture no key changes for 20 steps does.", factory=list)
    objective: str = flag("--objective", "coverage (the explorer's own reward) or load (plus RELINE's reward for frame-rate drops: load testing).", "coverage", kept=True)
    load_threshold: str | None = flag("--load-threshold", "With --objective load: a threshold file (load_threshold.json of an earlier run); default: measured by random play first.", None)
    load_area: str = flag("--load-area", "With --objective load: where frame-rate drops are rewarded, everywhere or pathways.", "everywhere")
    max_restarts: int = flag("--max-restarts", "Game crashes to restart from (each is a crash finding); at one more the run stops, and the report says why.", 3, limits=(0, 1000))
    reward: str | None = flag("--reward", "evolve: the winning score's reward, module:function or file.py:function over (frame, info); needed where the game has none (a window, the park).", None)
    population: int = flag("--population", "evolve: policies in the population.", 30, limits=(2, 10_000))
    generations: int = flag("--generations", "evolve: generations to run.", 10, limits=(1, MANY))

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise UserError(f"--objective {self.objective!r}: use one of {', '.join(OBJECTIVES)}")
        if self.objective == "load" and self.explorer == "random":
            raise UserError("--objective load trains the PPO explorer; use --explorer inspector or ppgta "
                            "(a random run's report shows its frame times anyway)")
        if self.load_area not in ("everywhere", "pathways"):
            raise UserError(f"--load-area {self.load_area!r}: use everywhere or pathways")
        if self.explorer == "evolve":  # its own loop (playtester/evolution/run.py), its own checks
            return
        if self.explorer not in EXPLORERS:
            raise UserError(f"--explorer {self.explorer!r}: use one of {', '.join(EXPLORERS)}, evolve")
        if self.explorer in NEEDS_PATH_POLICY and not self.preference:
            raise UserError(f"--explorer {self.explorer} needs the path-following policy: give --preference models/path.ckpt "
                            "(or --explorer inspector|random)")
        if self.novelty_scale not in NOVELTY_SCALES:
            raise UserError(f"--novelty-scale {self.novelty_scale!r}: use {' or '.join(NOVELTY_SCALES)}")
        if self.episodic_weight and not self.preference:
            raise UserError(f"--episodic-weight {self.episodic_weight}: the episodic novelty reads the path policy's "
                            "encoder features; give --preference models/path.ckpt")
        for name in ("episodes", "steps", "num_envs", "rollout", "stuck_steps", "track_every"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be at least 1")
        if self.seq_len < 0 or (self.seq_len and self.rollout % self.seq_len):
            raise UserError(f"--seq-len {self.seq_len}: must divide --rollout {self.rollout} (or be 0: whole rollouts)")
        if not 0.0 <= self.min_score <= 1.0:
            raise UserError(f"--min-score {self.min_score}: a detector confidence, between 0 and 1")
        if self.device not in DEVICES:
            raise UserError(f"--device {self.device!r}: use {' or '.join(DEVICES)}")
        if self.acting not in ACTING:
            raise UserError(f"--acting {self.acting!r}: use {' or '.join(ACTING)}")
        if self.acting == "int8" and self.device != "cpu":
            raise UserError(f"--acting int8 quantises the explorer and the test policy for the CPU; with --device {self.device} leave it at fp32")
        if self.serve and self.game.startswith("window:"):
            raise UserError("--serve: a window game plays one instance, with nothing to batch; leave it off")
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
        harness = [name for name, given in (("--launch", self.launch), ("--reset", self.reset),
                                            ("--out-of-play", self.out_of_play)) if given]
        if harness and not self.game.startswith("window:"):
            raise UserError(f"{harness[0]}: only a window game (window:TITLE) is launched, reset by keys and watched "
                            f"for game over; {self.game} is started by playtester itself")
        check_harness(self.launch, self.reset, self.out_of_play)
        if self.telemetry_port is not None and not self.game.startswith("window:"):
            raise UserError(f"--telemetry-port: only a window game listens for telemetry; {self.game} reports its own")
        check_object_source(self.detector, self.oracle_labels, needed=self.tester is not None,
                            needed_by=f"--tester {self.tester}")

    def game_options(self) -> dict[str, Any]:
        """What `make_game` takes for this run's game."""
        options: dict[str, Any] = {"max_steps": self.steps}
        if self.telemetry_port is not None:
            options["telemetry_port"] = self.telemetry_port
        return options | harness_options(self.launch, self.reset, self.out_of_play)

    def to_config(self) -> dict[str, Any]:
        config = asdict(self)
        config["agent"] = {"ppgta": "PPGTA explorer", "ppgta-episodic": "PPGTA explorer + episodic novelty (E3B)",
                           "episodic": "episodic novelty (E3B) + preference explorer", "inspector": "Inspector-style explorer",
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


def check_harness(launch: str | None, reset: str | None, out_of_play: list[str]) -> None:
    """Refuse a launch command that names no program, a reset recipe with a key no key map may
    press or an unreadable screenshot, and an unreadable out-of-play screenshot, before any game starts."""
    if launch is not None:
        from playtester.capture.window.launch import launch_argv

        launch_argv(launch)
    if reset is not None:
        from playtester.plans.reset import reset_recipe

        reset_recipe(reset)
    if out_of_play:
        from playtester.capture.window.play_state import OutOfPlay

        OutOfPlay(out_of_play)


def harness_options(launch: str | None, reset: str | None, out_of_play: list[str]) -> dict[str, Any]:
    """The `make_game` options of a window game's harness: its launch command, reset recipe and
    out-of-play screenshots (`capture/window/game.py`)."""
    options: dict[str, Any] = {}
    if launch is not None:
        options["launch"] = launch
    if reset is not None:
        from playtester.plans.reset import reset_recipe

        options["reset_recipe"] = reset_recipe(reset)
    if out_of_play:
        options["out_of_play"] = list(out_of_play)
    return options
