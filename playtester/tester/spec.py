"""What one tester run is: `RunSpec`, its command line, its saved config.yaml and its resume
check in one dataclass, with the checks of the files it names.

Light on purpose (no torch, no engine): `playtester --help` builds every `run` subcommand's
options from it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, NamedTuple

from playtester.capture.envs import check_shows_frames
from playtester.errors import UserError
from playtester.files import read_json
from playtester.options import (
    OBJECT_DETECTOR,
    MANY, Bounds, Choice, Count, InFile, Number, OptionType, OutFolder, Parser, Seed, Size, Switch, Text,
)
from playtester.exploration.modes import NOVELTY_WEIGHTS, novelty_scale_of
from playtester.perception.candidates import CONFIRM_HITS, CONFIRM_WINDOW
from playtester.tester.object_source import FOUND_BY_KEY, NO_OBJECTS, check_object_source, object_source

EXPLORERS = ("ppgta", "ppgta-episodic", "episodic", "inspector", "random")
"""`ppgta`: RND novelty + the path policy's preference; `ppgta-episodic`: that + E3B's elliptical
episodic bonus; `episodic`: the episodic bonus + the preference, no RND; `inspector`:
single-predictor RND only; `random`: uniform random actions (`exploration/modes.py`)."""
NEEDS_PATH_POLICY = ("ppgta", "ppgta-episodic", "episodic")
"""The explorers rewarded with the path policy's preference (and read its encoder's features)."""
NOVELTY_SCALES = ("return", "step")
"""What the explorer's novelties are divided by (`ExplorationRewardConfig.novelty_scale`)."""
EPISODIC_MEMORIES = ("episode", "run")
"""What the episodic novelty remembers (`EpisodicConfig.memory`)."""
OBJECTIVES = ("coverage", "load")
DEVICES = ("cpu", "cuda")
"""Where a run's networks run (`--device`); the games always play on the CPU."""
TRACK_EVERY = 4
"""The detector every 4th step of an OOI test, the tracker in between, unless the texture oracle
needs the detector's crops (`track_every`; docs/benchmarks/ppo-and-loop.md)."""
RETIRED = ("seq_len", "rnd_train_steps", "overlap_rnd", "overlap_update", "lockstep", "acting")
"""Options of earlier versions, each now fixed at what paid (docs/benchmarks/ppo-and-loop.md, "The
defaults"): a --config or an older run's config.yaml may still name them; they are ignored."""


@dataclass(frozen=True)
class Flag:
    """How a `RunSpec` field is given on the command line (`playtester/commands/run.py` builds
    each `run` subcommand's options from these)."""

    name: str
    """The option, e.g. `--envs`."""
    help: str
    kind: OptionType
    """What it takes (`playtester/options.py`), on the command line and in a --config file."""
    kept: bool = False
    """A resumed run must keep it: the logs and the explorer's checkpoint were made with it."""


def flag(name: str, kind: OptionType, help: str, default: Any = MISSING, *, kept: bool = False,
         factory: Callable[[], Any] | None = None) -> Any:
    """A run spec's field (`RunSpec`, `EvolveSpec`) with its command-line option."""
    metadata = {"flag": Flag(name, help, kind, kept)}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(kw_only=True)
class RunSpec:
    """One tester run: its command line (each field's `Flag`), its saved config.yaml (`to_config`)
    and its resume check (the `kept` flags). Everything a game instance needs to build its tester
    loop: paths and options only, so that it pickles into the game workers."""

    game: str = flag("--game", Text(), "Game spec (see `playtester games`).", kept=True)
    tester: str | None = flag("--tester", InFile("policy checkpoint"), "Test policy checkpoint (e.g. the inspect policy), with --detector to find the OOIs it tests; without it the run explores and watches the oracles, testing no OOI.", None, kept=True)
    run_dir: str = flag("--out", OutFolder(), "Run folder, e.g. runs/r1 (refused if it exists, unless --resume or --overwrite).")
    explorer: str = flag("--explorer", Choice(*EXPLORERS), "ppgta (PPO with RND novelty + the path policy's preference, trained online), ppgta-episodic (ppgta + E3B's elliptical episodic novelty on the path policy's inverse-dynamics features: what this episode has not seen yet), episodic (the episodic novelty + the preference, no RND), inspector (PPO with single-predictor RND, the baseline) or random (a population of explorers is `playtester run evolve`).", "ppgta", kept=True)
    preference: str | None = flag("--preference", InFile("path policy checkpoint"), "Path-following policy checkpoint: the explorer starts from it and is rewarded for keeping its style (needed by --explorer ppgta, ppgta-episodic and episodic).", None, kept=True)
    rnd_weight: float | None = flag("--rnd-weight", Number(0.0), "The weight of ensemble RND's novelty (global, across episodes) in the explorer's novelty; 0 leaves RND out; default: the --explorer's (1, or 0 for episodic).", None, kept=True)
    episodic_weight: float | None = flag("--episodic-weight", Number(0.0), "The weight of E3B's elliptical episodic novelty (within the episode) in the explorer's novelty; 0 leaves it out; default: the --explorer's (1 for ppgta-episodic and episodic, else 0).", None, kept=True)
    episodic_memory: str = flag("--episodic-memory", Choice(*EPISODIC_MEMORIES), "What the episodic novelty remembers: episode (E3B: what this episode has seen, on this instance) or run (every frame of the run on every instance: a frame is novel only if no episode pointed its way; an ablation, docs/benchmarks/explorer.md).", "episode", kept=True)
    returns: float = flag("--returns", Number(0.0, 1.0), "The share of each game instance's episodes, after its first, that begin by returning to a frontier place (Go-Explore): the game is reset as for the earlier episode that first saw the place and that episode's actions are played again (counted in the episode's steps, no test or explorer step spent on them), then the explorer explores from there; the place is chosen from pixels by how rarely it was seen. Needs a game that replays the same given the same actions (Doom, Gymnasium). 0: every episode starts afresh; an ablation (docs/benchmarks/explorer.md).", 0.0, kept=True)
    novelty_scale: str | None = flag("--novelty-scale", Choice(*NOVELTY_SCALES), "What the explorer's novelties are divided by before they are mixed with the preference: return (the running std of their discounted sum, as CleanRL's RND: the novelty comes out about 2 % of PPGTA's reward) or step (the running std of their per-step values: unit scale). Default: step for ppgta-episodic, return for the others (what measured best, docs/benchmarks/explorer.md).", None, kept=True)
    detector: str | None = flag("--detector", OBJECT_DETECTOR, "Detector checkpoint that finds the OOIs to test (from `playtester train detector`); a run with --tester refuses to start without it or --oracle-labels.", None, kept=True)
    oracle_labels: bool = flag("--oracle-labels", Switch(), "Find the OOIs through the engine's labels instead of a detector (the built-in park only): an ablation, and the report says so.", False, kept=True)
    episodes: int = flag("--episodes", Count(1, MANY), "Episodes in the whole run, each from a random start.", 3)
    steps: int = flag("--steps", Count(1, MANY), "Game steps per episode (test steps included).", 500, kept=True)
    num_envs: int = flag("--envs", Count(1, 64), "Game instances played at once, one process each (the PPO explorer and evolve; random and window games play one).", 2, kept=True)
    rollout: int = flag("--rollout", Size(MANY), "PPO steps per game instance between updates.", 64, kept=True)
    texture_reference: str | None = flag("--texture-reference", InFile("COCO labels.json"), "COCO labels of healthy OOIs for the texture oracle.", None)
    assertions: list[str] = flag("--assert", Text(), "A user assertion, module:function or file.py:function (repeatable).", factory=list)
    stuck_steps: int = flag("--stuck-steps", Count(1, MANY), "Steps of unchanged picture under input that count as stuck.", 40)
    test_steps: int | None = flag("--test-steps", Count(1, MANY), "Steps of one OOI test (default: the test policy's demo length).", None)
    min_score: float | None = flag("--min-score", Number(0.0, 1.0), "Detections below this confidence are not tested, whatever their class (each false detection tested costs a test's steps); default: the per-class thresholds the detector's checkpoint keeps (picked by `train detector` for precision 0.9 on its held-out shots) where those held 20 background images or more (`shots --background`), 0.6 where one is lower, else 0.6 (docs/benchmarks/real-tests.md).", None)
    confirm_hits: int = flag("--confirm-hits", Count(1, MANY), "A detection is tested once it was found in this many of the last --confirm-window detector passes, of the same class, in about the same place and size (1: every detection at once); one fewer while every box of it scored 0.9 or above, when the detector's thresholds were calibrated among background images (`shots --background`); the others are logged in rejected.jsonl (docs/benchmarks/real-tests.md).", CONFIRM_HITS)
    confirm_window: int = flag("--confirm-window", Count(1, MANY), "The detector passes --confirm-hits counts; while a detection close enough to test waits for confirmation, the detector looks every step.", CONFIRM_WINDOW)
    track_every: int | None = flag("--track-every", Count(1, MANY), "During an OOI test, the detector looks for the OOI every this many steps and a tracker follows it in between. Default: 4 (a test step in about 0.6 of the time at 1, the whole loop ×1.7 at one instance), or 1 with --texture-reference: only the detector's passes give the texture oracle its crops, and at 4 it gets a quarter of a test's frames.", None)
    seed: int = flag("--seed", Seed(), "Seed of starts, action sampling and PPO.", 0, kept=True)
    rules: str | None = flag("--rules", Choice("immortal", "no-monsters", "play"), "How a Doom level is played while tested: immortal (god mode; the default for stock levels, WADs and scenarios), no-monsters, or play (as shipped: each death a finding with its place and what killed it; the level starts again). A level that ends early starts again within the episode.", None, kept=True)
    device: str = flag("--device", Choice(*DEVICES), "Where the networks run: cpu, or cuda (the explorer, its rewards, and every game instance's detector and test policy on the GPU; the games stay on CPU workers).", "cpu")
    serve: bool = flag("--serve", Switch(), "Serve every game instance's detector and test policy from one process, batched across the instances (on by itself with --device cuda and more than one instance).", False)
    map: str | None = flag("--map", InFile("map image (PNG or JPEG)"), "Bird's-eye map image of a game without built-in ground truth (a window game with telemetry).", None)
    map_bounds: list[float] | None = flag("--map-bounds", Bounds(), "X0,Y0,X1,Y1: the world area (telemetry units) the --map image shows.", None)
    oois: str | None = flag("--oois", InFile("JSON list of OOIs"), "JSON list of the known OOIs ({id, kind, x, y}): detections are matched to them by telemetry and the report draws them.", None)
    telemetry_port: int | None = flag("--telemetry-port", Count(1, 65535), "A window game's UDP port for JSON-line telemetry from its dev build (pos, angle, fps).", None)
    launch: str | None = flag("--launch", Text(), "The command that starts a window game, e.g. \"./MyGame -windowed\": playtester starts it, waits for its window (the title after window:), ends it with the run (also when playtester is killed) and starts it again after a crash (a crash finding; the run goes on).", None)
    reset: str | None = flag("--reset", Text(), "A window game's reset recipe, played before every episode and after a game over, outside the episode's steps: a reset plan (YAML: keys, waits, until a screenshot matches) or the keys themselves, e.g. \"y 10 down enter 20\" (a number waits that many steps). See docs/your-own-game.md.", None)
    out_of_play: list[str] = flag("--out-of-play", InFile("screenshot (PNG or JPEG)"), "A screenshot of a window game's screen that is not play (game over, a menu; repeatable): a frame that matches one ends the episode, and the reset recipe runs. Without one, with --reset, a picture no key changes for 20 steps does.", factory=list)
    objective: str = flag("--objective", Choice(*OBJECTIVES), "coverage (the explorer's own reward) or load (plus RELINE's reward for frame-rate drops: load testing).", "coverage", kept=True)
    load_threshold: str | None = flag("--load-threshold", InFile("load threshold JSON"), "With --objective load: a threshold file (load_threshold.json of an earlier run); default: measured by random play first.", None)
    load_area: str = flag("--load-area", Choice("everywhere", "pathways"), "With --objective load: where frame-rate drops are rewarded, everywhere or pathways.", "everywhere")
    frame_clock: str = flag("--frame-clock", Choice("cpu", "wall"), "A ViZDoom step's frame time: cpu (the engine's and the game thread's CPU time, which other work on the machine does not change) or wall.", "cpu", kept=True)
    max_restarts: int = flag("--max-restarts", Count(0, 1000), "Game crashes to restart from (each is a crash finding); at one more the run stops, and the report says why.", 3)
    def __post_init__(self) -> None:
        from playtester.capture.rules import check_rules

        check_values(self)
        self.rules = check_rules(self.rules, self.game)
        if self.track_every is None:
            self.track_every = 1 if self.texture_reference else TRACK_EVERY
        if self.novelty_scale is None:
            self.novelty_scale = novelty_scale_of(self.explorer)
        check_shows_frames(self.game, f"--game {self.game}", "the tester")
        if self.objective == "load" and self.explorer == "random":
            raise UserError("--explorer random: a load test (`playtester run load`) trains the PPO explorer; use --explorer "
                            "inspector or ppgta (a random run's report shows its frame times anyway)")
        if self.explorer in NEEDS_PATH_POLICY and not self.preference:
            raise UserError(f"--explorer {self.explorer} needs the path-following policy: give --preference models/path.ckpt "
                            "(or --explorer inspector|random)")
        episodic = self.episodic_weight if self.episodic_weight is not None else NOVELTY_WEIGHTS.get(self.explorer, (0, 0))[1]
        if self.episodic_memory != "episode" and not episodic:
            raise UserError(f"episodic_memory {self.episodic_memory}: --explorer {self.explorer} has no episodic novelty; "
                            "use --explorer ppgta-episodic or episodic, or give --episodic-weight")
        if self.returns and self.game.startswith("window:"):
            raise UserError(f"returns {self.returns}: a window game plays in real time and does not replay the same "
                            "from the same keys, so a frontier cannot be returned to; leave returns at 0")
        if self.episodic_weight and not self.preference:
            raise UserError(f"--episodic-weight {self.episodic_weight}: the episodic novelty reads the path policy's "
                            "encoder features; give --preference models/path.ckpt")
        if not 1 <= self.confirm_hits <= self.confirm_window:
            raise UserError(f"--confirm-hits {self.confirm_hits} of --confirm-window {self.confirm_window}: "
                            "the hits must be at least 1 and at most the window")
        if self.serve and self.game.startswith("window:"):
            raise UserError("--serve: a window game plays one instance, with nothing to batch; leave it off")
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

    @property
    def acting(self) -> str:
        """The precision of the networks that play: int8 on a CPU (the explorer's decisions, from an
        int8 copy of it, and the test policy's steps; the explorer learns in fp32), fp32 on a GPU."""
        return "int8" if self.device == "cpu" else "fp32"

    def game_options(self, policies: dict[str, Any] | None = None) -> dict[str, Any]:
        """What `make_game` takes for this run's game. `policies`: the run's policies loaded
        already (`{path: LivePolicy}`, `playtester/tester/assemble.py`), whose key maps a level
        plays with; else they are read from the checkpoints."""
        options: dict[str, Any] = {"max_steps": self.steps}
        if self.rules is not None:
            options["rules"] = self.rules
        from playtester.capture.rules import is_level

        paths = (self.tester, self.preference)
        if not is_level(self.game):
            keymap = None
        elif policies is None:
            keymap = policy_keymap(*paths)
        else:
            keymap = same_keymap({p: policies[p].cfg.keymap or None for p in paths if p})
        if keymap is not None:  # a level plays with the key map its policies were trained with
            options["keymap"] = keymap
        if self.game.startswith("doom:") and self.frame_clock != "cpu":
            options["frame_clock"] = self.frame_clock
        if self.telemetry_port is not None:
            options["telemetry_port"] = self.telemetry_port
        return options | harness_options(self.launch, self.reset, self.out_of_play)

    def to_config(self, found_by: str | None = None) -> dict[str, Any]:
        """The run's config.yaml: its options, what explored, and what found the objects
        (`found_by`, where the detector's checkpoint was read already; else read here)."""
        config = asdict(self)
        config["agent"] = {"ppgta": "PPGTA explorer", "ppgta-episodic": "PPGTA explorer + episodic novelty (E3B)",
                           "episodic": "episodic novelty (E3B) + preference explorer", "inspector": "Inspector-style explorer",
                           "random": "random explorer"}[self.explorer]
        if self.objective == "load":
            config["agent"] += " + load reward"
        if not self.tester:
            found_by = NO_OBJECTS
        config[FOUND_BY_KEY] = found_by if found_by is not None else object_source(self.detector, self.oracle_labels)
        return config


def same_option(name: str) -> Any:
    """`RunSpec`'s field `name` for another spec: its default and its `Flag`, defined once."""
    f = RunSpec.__dataclass_fields__[name]
    return field(default=f.default, default_factory=f.default_factory, metadata=f.metadata)


@dataclass(kw_only=True)
class EvolveSpec:
    """`playtester run evolve`: a population of explorers (Wuji; `playtester/evolution/run.py`),
    with no test policy and no detector. Its options are `RunSpec`'s where they are the same option
    (`same_option`); its config.yaml holds them at the top, as every run's."""

    game: str = same_option("game")
    run_dir: str = same_option("run_dir")
    reward: str | None = flag("--reward", Text(), "The winning score's reward, module:function or file.py:function over (frame, info); needed where the game has none (a window, the park).", None)
    population: int = flag("--population", Count(2, 10_000), "Policies in the population.", 30)
    generations: int = flag("--generations", Count(1, MANY), "Generations to run.", 10)
    steps: int = same_option("steps")
    num_envs: int = same_option("num_envs")
    seed: int = same_option("seed")
    assertions: list[str] = same_option("assertions")
    stuck_steps: int = same_option("stuck_steps")

    def __post_init__(self) -> None:
        check_values(self)


def policy_keymap(*paths: str | None) -> dict[str, Any] | None:
    """The key map (as a dict) the run's policies were trained with, None without policies; a
    Doom level plays with it (a policy trained on the park's 9 actions keeps them, without USE).
    Refused when two policies were trained with different key maps."""
    maps = {}
    for path in paths:
        if path:
            maps[path] = _checkpoint_keymap(str(path), Path(path).stat().st_mtime_ns if Path(path).exists() else 0)
    return same_keymap(maps)


def same_keymap(maps: dict[str, dict[str, Any] | None]) -> dict[str, Any] | None:
    """The one key map of `{checkpoint: its key map or None}`; refused when two differ."""
    known = {p: m for p, m in maps.items() if m is not None}
    actions = {json.dumps([a["keys"] for a in m["actions"]]) for m in known.values()}
    if len(actions) > 1:
        sizes = "; ".join(f"{p}: {len(m['actions'])} actions" for p, m in known.items())
        raise UserError(f"the run's policies were trained with different key maps ({sizes}); train them on demos of one key map")
    return next(iter(known.values()), None)


@functools.lru_cache(maxsize=16)
def _checkpoint_keymap(path: str, stamp: int) -> dict[str, Any] | None:
    from playtester.perception.training import read_checkpoint

    try:
        config, _ = read_checkpoint(path, "policy")
    except UserError:
        return None  # refused, with its reason, where the run loads it
    keymap = (config.get("policy") or {}).get("keymap")
    return keymap if isinstance(keymap, dict) else None


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


VALUES = (Count, Number, Choice, Switch)
"""The option types of values (numbers, words, switches) rather than paths: a `RunSpec` built in
code has its values checked by them too (`check_values`); its paths are checked by their readers."""


def check_values(spec: RunSpec | EvolveSpec) -> None:
    """Each number, word and switch of `spec` through its option's type, refused in the words
    the command line uses (a spec from the command line has passed them already)."""
    for f in fields(spec):
        flag = f.metadata.get("flag")
        value = getattr(spec, f.name)
        if flag is not None and value is not None and isinstance(flag.kind, VALUES):
            Parser(flag.kind, flag.name)(value)


def check_map(image: str, bounds: list[float] | None) -> None:
    """Refuse an unreadable `--map` image or `--map-bounds` that enclose no area."""
    import cv2
    import numpy as np

    try:  # decoded from its bytes: cv2.imread prints a warning of its own for a missing file
        data = np.fromfile(str(image), dtype=np.uint8)
    except OSError:
        data = np.zeros(0, np.uint8)
    if data.size == 0 or cv2.imdecode(data, cv2.IMREAD_COLOR) is None:
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
        from playtester.tester.reset import reset_recipe

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
        from playtester.tester.reset import reset_recipe

        options["reset_recipe"] = reset_recipe(reset)
    if out_of_play:
        options["out_of_play"] = list(out_of_play)
    return options
