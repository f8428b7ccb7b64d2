"""`playtester run`: the tester on a game — explore, detect, test, find bugs, report."""

from __future__ import annotations

import contextlib
import functools
import inspect
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer
import yaml
from rich.console import Console

from playtester.files import holds_lines, new_folder, write_text_atomic
from playtester.errors import UserError
from playtester.options import (
    InFile, Switch, Text, about, check_free_disk, check_memory, config_value, inputs_checked, option, shown, threads_option,
)
from playtester.commands.scenario import progress
from playtester.cores import give as give_cores
from playtester.tester.spec import NEEDS_PATH_POLICY, RETIRED, EvolveSpec, RunSpec

try:  # typer >= 0.16 carries its own copy of click
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - older typer on click
    from click import get_current_context
    from click.core import ParameterSource

console = Console()

LAUNCH_FLAGS = {
    "config": (Optional[Path], option(InFile("YAML file of run options"), None, "--config", help="A YAML file of this run's options, named as in a run's config.yaml (which is one): what the command line does not give is read from it.")),
    "resume": (bool, typer.Option(False, "--resume", help="Continue the run in --out that was interrupted (its options from its config.yaml; the explorer from its last checkpoint); give more --episodes to play on.")),
    "overwrite": (bool, typer.Option(False, "--overwrite", help="Delete an existing run folder first.")),
    "threads": (int, threads_option()),
    "cluster": (Optional[str], option(Text(), None, "--cluster", help="Run the game instances as Ray actors: ray (a local Ray started for this run), auto (the Ray cluster this machine is part of) or ray://HOST:PORT; this process alone writes the run folder (needs pip install -e \".\\[cluster]\").")),
}
"""Options of how a run starts, not of what it does: not saved in its config.yaml."""


@dataclass(frozen=True)
class Subcommand:
    """One `playtester run` subcommand: the fields of its spec (`RunSpec`, or `EvolveSpec` for
    evolve) it takes on its command line, those it takes from --config only (its help names
    them), those its purpose fixes, and its launch options."""

    name: str
    help: str
    flags: tuple[str, ...]
    config_only: tuple[str, ...]
    fixed: dict[str, Any] = field(default_factory=dict)
    launch: tuple[str, ...] = ("config", "resume", "overwrite", "threads")
    spec: type = RunSpec


CONFIG_KNOBS = ("assertions", "stuck_steps", "track_every", "min_score", "confirm_hits", "confirm_window", "max_restarts")
"""The oracles' and the OOI tests' knobs a run takes from --config (its help names them)."""
SUBCOMMANDS = (
    Subcommand("explore", "Explore a game and test the objects it finds: the PPO explorer (ppgta, ppgta-episodic, episodic "
               "or inspector) learns as "
               "it plays, the test policy tests every object the detector finds, the oracles watch for crashes, stuck "
               "states, texture bugs and failed assertions; then the report.",
               ("game", "run_dir", "explorer", "preference", "tester", "detector", "oracle_labels", "texture_reference", "episodes",
                "steps", "test_steps", "num_envs", "seed", "rules", "serve", "device"),
               ("rollout", "rnd_weight", "episodic_weight", "novelty_scale", "episodic_memory", "returns", *CONFIG_KNOBS), {"objective": "coverage"},
               ("config", "resume", "overwrite", "threads", "cluster")),
    Subcommand("window", "Test a game in a window of this desktop (or a virtual screen): the same tester, one instance, "
               "with the game's bird's-eye map, telemetry and known objects where its dev build gives them.",
               ("game", "run_dir", "explorer", "preference", "tester", "detector", "episodes", "steps", "launch", "reset",
                "out_of_play", "telemetry_port", "map", "map_bounds", "oois"),
               ("seed", "rollout", "rnd_weight", "episodic_weight", "novelty_scale", "episodic_memory", "texture_reference", "device", "test_steps", *CONFIG_KNOBS),
               {"objective": "coverage"}),
    Subcommand("load", "Load-test a game (RELINE): the PPO explorer is also rewarded for frame-rate drops, measured "
               "against a threshold from random play; the report maps where the game slows down.",
               ("game", "run_dir", "explorer", "preference", "tester", "detector", "oracle_labels", "episodes", "steps", "test_steps",
                "num_envs", "seed", "load_threshold", "load_area", "rules", "serve", "device"),
               ("rollout", "rnd_weight", "episodic_weight", "novelty_scale", "episodic_memory", "returns", "texture_reference", "frame_clock", *CONFIG_KNOBS),
               {"objective": "load"}, ("config", "resume", "overwrite", "threads")),
    Subcommand("evolve", "Evolve a population of explorers (Wuji): for exploration and for winning, offspring refined "
               "by PPO; crash, stuck and assertion oracles on every evaluation.",
               ("game", "run_dir", "reward", "population", "generations", "steps", "num_envs", "seed", "assertions",
                "stuck_steps"), (), {}, ("config", "resume", "overwrite", "threads", "cluster"), EvolveSpec),
)
RESOLVED = ("map", "oois", "out_of_play")
"""Path fields kept as absolute paths (a window game's run may start in another folder)."""
LISTS = ("assertions", "out_of_play")
"""Fields given by a repeatable option."""


def resolve_reset(text: str) -> str:
    """`--reset`: a plan file by its absolute path (the run's config.yaml is read from elsewhere), keys as given."""
    from playtester.tester.reset import is_plan_file

    return str(Path(text).resolve()) if is_plan_file(text) else text


SPECS = (RunSpec, EvolveSpec)


@functools.cache
def spec_types() -> dict[str, Any]:
    """Each run spec field's type (resolved from its annotation)."""
    return {name: kind for spec in SPECS for name, kind in typing.get_type_hints(spec).items()}


def spec_flag(name: str) -> Any:
    """The `Flag` of the run spec field `name` (one definition per option: `same_option`)."""
    spec = next(spec for spec in SPECS if name in spec.__dataclass_fields__)
    return spec.__dataclass_fields__[name].metadata["flag"]


def option_names() -> set[str]:
    """The options a --config file may name: every run spec's fields."""
    return {f.name for spec in SPECS for f in fields(spec)}


def kept_on_resume() -> tuple[str, ...]:
    """The `RunSpec` fields a resumed run must keep: the logs and the explorer's checkpoint were made with them."""
    return tuple(f.name for f in fields(RunSpec) if f.metadata["flag"].kept)


def command(sub: Subcommand) -> Callable[..., None]:
    """The typer command of `sub`: its options are its spec's fields' flags and its launch options."""
    params = []
    for name in sub.flags:
        f, flag = sub.spec.__dataclass_fields__[name], spec_flag(name)
        default = ... if name == "run_dir" else None if name == "game" or f.default_factory is not MISSING else f.default
        if isinstance(flag.kind, Switch):
            param, annotation = typer.Option(default, flag.name, help=flag.help), bool
        else:
            param, annotation = option(flag.kind, default, flag.name, help=flag.help), Optional[str]
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=param,
                                        annotation=List[str] if name in LISTS else annotation))
    for name in sub.launch:
        annotation, param = LAUNCH_FLAGS[name]
        if name == "config" and sub.config_only:
            param = option(InFile("YAML file of run options"), None, "--config", help=f"{param.help} Also the options "
                           f"this command does not list: {', '.join(sub.config_only)}.")
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=param, annotation=annotation))

    def run_command(**given: Any) -> None:
        launch = {name: given.pop(name, None) for name in LAUNCH_FLAGS}
        source = get_current_context().get_parameter_source
        on_command_line = {k: v for k, v in given.items() if source(k) is not ParameterSource.DEFAULT}
        spec = spec_for(sub, on_command_line, launch["config"], bool(launch["resume"]))
        give_cores(launch["threads"] or 0)
        begin = start_evolve if isinstance(spec, EvolveSpec) else start
        begin(spec, launch["cluster"], bool(launch["resume"]), bool(launch["overwrite"]))

    run_command.__signature__ = inspect.Signature(params)
    run_command.__doc__ = sub.help
    run_command.__name__ = sub.name
    return run_command


def spec_for(sub: Subcommand, on_command_line: dict[str, Any], config: Path | None, resume: bool) -> RunSpec | EvolveSpec:
    """The run's spec: the defaults, then the run being resumed, then --config, then the command
    line; what `sub`'s purpose fixes is fixed."""
    out = Path(on_command_line["run_dir"])
    names = {f.name for f in fields(sub.spec)}
    values: dict[str, Any] = {}
    if resume and (out / "config.yaml").is_file():
        saved = saved_options(out)
        if sub.spec is not EvolveSpec and saved.get("evolution"):
            raise UserError(f"--resume: {out} is a population of explorers; continue it with `playtester run evolve "
                            f"--out {out} --resume`")
        values.update({k: v for k, v in saved.items() if k in names})
    asked = read_run_config(config, names) if config is not None else {}
    from_config = {k: v for k, v in asked.items() if k not in on_command_line}
    asked.update(on_command_line)
    asked = {k: as_field(k, v) for k, v in asked.items()}
    values.update(asked)
    values["run_dir"] = str(out)
    for key, value in sub.fixed.items():
        if asked.get(key, value) != value:
            other = [s.name for s in SUBCOMMANDS if s.fixed.get(key) == asked[key]]
            raise UserError(f"{key.replace('_', '-')} {asked[key]!r}: `playtester run {sub.name}` runs with {value!r}"
                            + "".join(f"; use `playtester run {o}`" for o in other[:1]))
        values[key] = value
    if values.get("game") is None:
        raise UserError("--game: missing; give the game spec (see `playtester games`), or a --config that names it")
    try:
        return sub.spec(**values)
    except UserError as e:  # a file from --config whose contents its reader refused: named as the --config file has it
        message = str(e)
        for key, value in from_config.items():
            said = f"{spec_flag(key).name} {shown(as_field(key, value))}"
            if isinstance(spec_flag(key).kind, InFile) and message.startswith(f"{said}:"):
                raise UserError(f"--config {config}: {key} {shown(as_field(key, value))}{message[len(said):]}") from None
        raise


def read_run_config(path: Path, names: set[str]) -> dict[str, Any]:
    """A --config file: a YAML mapping of the options `names` (a run's config.yaml: its other keys,
    the options of the other subcommands' specs, and the options of earlier versions now fixed
    (`RETIRED`), are ignored)."""
    from playtester.files import read_yaml

    doc = read_yaml(path, f"--config {path}")
    if not isinstance(doc, dict):
        raise UserError(f"--config {path}: expected a YAML mapping of options (e.g. a run's config.yaml)")
    if doc.get("explorer") == "evolve":  # an evolve run's config.yaml of earlier versions said so
        if "explorer" in names:
            raise UserError(f"--config {path}: explorer evolve: a population of explorers; use `playtester run evolve`")
        doc = {k: v for k, v in doc.items() if k != "explorer"}
    unknown = sorted(k for k in doc if k not in option_names() and k not in CONFIG_EXTRAS and k not in RETIRED)
    if unknown:
        raise UserError(f"--config {path}: unknown option {unknown[0]!r}; the options are "
                        f"{', '.join(sorted(names - {'run_dir'}))}")
    return {k: config_option(path, k, v) for k, v in doc.items() if k in names and k != "run_dir"}


def config_option(path: Path, key: str, value: Any) -> Any:
    """A --config value through its option's type (the same as on the command line): one line
    naming the file, the key and what to give when it is not one the option takes."""
    where, kind = f"--config {path}", spec_flag(key).kind
    if value is None and type(None) in typing.get_args(spec_types()[key]):
        return None
    if key in LISTS:
        if not isinstance(value, list):
            raise UserError(f"{where}: {key} {value!r}: give a list (one {spec_flag(key).name} each)")
        return [config_value(kind, key, v, where) for v in value]
    return config_value(kind, key, value, where)


def as_field(key: str, value: Any) -> Any:
    """A value as `RunSpec` keeps it: paths as text (absolute for `RESOLVED`), so that it saves in
    config.yaml; a --reset plan file by its absolute path (the run's config.yaml is read from elsewhere)."""
    if isinstance(value, Path):
        return str(value.resolve() if key in RESOLVED else value)
    if isinstance(value, (tuple, list)):
        return [as_field(key, v) for v in value]
    if key == "reset" and isinstance(value, str):
        return resolve_reset(value)
    return value


CONFIG_EXTRAS = ("agent", "found_by", "evolution")
"""Keys a run's config.yaml holds besides its options (what it was, for the report)."""


def launch_checks(cluster: str | None, resume: bool, overwrite: bool) -> str | None:
    """Refuse --resume with --overwrite and a bad --cluster; the cluster to join (None: none)."""
    from playtester.tester.cluster import check_cluster

    if resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other; give one")
    return check_cluster(cluster)


def start_evolve(spec: EvolveSpec, cluster: str | None, resume: bool, overwrite: bool) -> None:
    """Start (or resume) `playtester run evolve`'s population of explorers (its own loop, with no
    test policy and no detector: `playtester/evolution/run.py`) and write its report."""
    from playtester.evolution.run import run_evolve_command
    from playtester.report.build import build_report

    out = Path(spec.run_dir)
    cluster = launch_checks(cluster, resume, overwrite)
    check_run_folder(out, resume, overwrite)
    with contextlib.ExitStack() as stack:
        if cluster:
            from playtester.tester.cluster import ray_session

            stack.enter_context(ray_session(cluster, spec.num_envs))
        run_evolve_command(spec, resume=resume, overwrite=overwrite, log=console.print, on_cluster=cluster is not None)
    console.print(f"wrote {out} (generations, findings) and the report {build_report(out)}")


def start(spec: RunSpec, cluster: str | None, resume: bool, overwrite: bool) -> None:
    """Start (or resume) the tester run `spec` names (explore, window, load) and write its report."""
    from playtester.report.build import build_report
    from playtester.tester.runner import episodes_left

    out = Path(spec.run_dir)
    cluster = launch_checks(cluster, resume, overwrite)
    if cluster and spec.serve:
        raise UserError(f"--cluster {cluster}: Ray's instances may play on other machines and load their own models; "
                        "leave serve off with --cluster")
    check_run_folder(out, resume, overwrite)
    if resume:
        check_same_run(out, asdict(spec))
    run = check_inputs(spec, cluster is not None)  # everything that can be refused is refused before the run folder is written
    inputs_checked()
    from playtester.bugs.softlock import softlock_off

    off = softlock_off(spec.game)
    if off:  # the level plays; the oracle cannot judge it
        console.print(off, soft_wrap=True)
    played = functools.partial(holds_lines, out / "trajectory.jsonl")
    with new_folder(out, replace=overwrite and not resume, kept=played), contextlib.ExitStack() as stack:
        if cluster and (not resume or episodes_left(spec) > 0):  # a cluster out of reach too
            from playtester.tester.cluster import ray_session

            stack.enter_context(ray_session(cluster, spec.num_envs))
        out.mkdir(exist_ok=True)
        if resume:
            extend_budget(out, spec.episodes)
        else:
            write_text_atomic(out / "config.yaml", yaml.safe_dump(run.to_config(), sort_keys=False))
        play(run, cluster, resume, spec.episodes - episodes_left(spec))
    report = build_report(out)
    from playtester.tester.crashes import read_stop

    if read_stop(out):
        console.print(f"the run stopped early: {read_stop(out)}")
    console.print(f"wrote {out} (trajectory, tests, findings) and the report {report}")


def play(run, cluster: str | None, resume: bool, already: int) -> None:
    """Play the run's episodes with its explorer, a progress bar over them."""
    from playtester.tester.crashes import CrashNews
    from playtester.tester.runner import episodes_left, explore_at_random, explore_with_ppo

    spec = run.spec
    episodes, explorer = spec.episodes, spec.explorer
    crashes = CrashNews(Path(spec.run_dir))
    with progress() as bar:
        task = bar.add_task(f"episodes ({explorer} explorer)", total=episodes, completed=already)

        def advance(ended: int) -> None:
            for line in crashes.lines():
                console.print(line, soft_wrap=True)
            bar.update(task, completed=min(episodes, already + ended))

        if already >= episodes:
            console.print(f"every one of the {episodes} episodes was played (an interrupted one is kept as it was); "
                          "give more --episodes to play on")
        elif explorer == "random" and cluster:
            from playtester.tester.cluster import explore_at_random_on_cluster

            explore_at_random_on_cluster(spec, advance, say=console.print)
        elif explorer == "random":
            explore_at_random(run, advance, say=console.print)
        else:
            from playtester.load.objective import load_objective

            objective = load_objective if spec.objective == "load" else None
            result = explore_with_ppo(run, advance, resume=resume, cluster=cluster is not None, objective=objective)
            console.print(f"explorer: {result.global_step} steps trained, checkpoint {result.checkpoint}")
        advance(episodes - already - episodes_left(spec))


TRAJECTORY_BYTES_PER_STEP = 400
"""An upper bound of one trajectory.jsonl line (a step with position, mode and OOI)."""


def check_explorer_memory(spec, preference) -> None:
    """Refuse a PPO explorer whose rollout and update would not fit (`rollout_memory`): on the
    preference policy's frames and features (the explorers that take it), else on 64-pixel frames
    through convolutions."""
    from playtester.capture.frames import FrameSpec
    from playtester.exploration.explorer import rollout_memory

    if preference is not None and spec.explorer in NEEDS_PATH_POLICY:
        frames, features = preference.policy.cfg.frames, preference.policy.cfg.feature_dim
    else:
        frames, features = FrameSpec.square(64), None
    check_memory(rollout_memory(spec.rollout, spec.num_envs, frames, features),
                 f"--rollout {spec.rollout} × --envs {spec.num_envs} ({frames.width}×{frames.height} frames)")


def check_run_folder(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse an --out that is a file, or a run folder that exists without --resume or --overwrite;
    on --resume, cut the run's logs back to their last whole records (a stop mid-write tears the last)."""
    from playtester.tester.runlog import cut_torn_lines

    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file, not a run folder; give the path of a folder (it is created)")
    if out.exists() and not resume and not overwrite:
        raise UserError(f"--out {out}: the run folder exists; give --resume to continue it or --overwrite to replace it")
    if resume and out.is_dir():
        for line in cut_torn_lines(out):
            console.print(f"--resume: {line}", soft_wrap=True)


def check_device(device: str) -> None:
    """Refuse `--device cuda` where torch sees no CUDA device, before anything is built."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda: torch sees no CUDA device on this machine (a CPU build of torch, or no GPU); "
                            "use --device cpu")


def check_inputs(spec, cluster: bool = False):
    """Load every file the run names once and probe its game once (`playtester/tester/assemble.py`),
    and check the budget fits, so that bad input is one line naming its option before anything is
    written; the `Run` assembled, handed down to the explorer and the instances."""
    from playtester.tester.assemble import assemble, load_inputs

    check_device(spec.device)
    inputs = load_inputs(spec, cluster)
    with about("--load-threshold"):
        if spec.load_threshold:
            from playtester.load.reward import LoadThreshold

            LoadThreshold.load(spec.load_threshold)
    if spec.explorer != "random":
        check_explorer_memory(spec, inputs.preference)
    check_free_disk(Path(spec.run_dir), spec.episodes * spec.steps * TRAJECTORY_BYTES_PER_STEP,
                    f"--episodes {spec.episodes} × --steps {spec.steps}")
    return assemble(spec, inputs)


def saved_options(out: Path) -> dict[str, Any]:
    """The options the run in `out` was started with, read from its config.yaml as today's
    `RunSpec` names them: a run from before --oracle-labels said `detector: ground-truth`, and an
    evolve run from before its options were written at the top kept them in its `evolution` section."""
    from playtester.tester.runlog import read_config

    saved = dict(read_config(out))
    if saved.get("detector") == "ground-truth":
        saved.update(detector=None, oracle_labels=True)
    if saved.get("evolution") and "population" not in saved:
        from playtester.evolution.run import options_of_old_run

        saved.update(options_of_old_run(saved["evolution"]))
    return saved


def check_same_run(out: Path, now: dict) -> None:
    """Refuse a --resume whose options differ from the interrupted run's (except the budget)."""
    if not (out / "config.yaml").exists():
        raise UserError(f"--resume: {out} holds no run to continue (no config.yaml)")
    was = saved_options(out)
    for key in kept_on_resume():
        if key in was and was[key] != now[key]:
            raise UserError(f"--resume: {out} was run with {key.replace('_', '-')}={was[key]!r}, now {now[key]!r}; "
                            "give the same options (only --episodes may grow), or start a new run")


def extend_budget(out: Path, episodes: int) -> None:
    """A resumed run's config.yaml with the --episodes it now plays (the only option that may change)."""
    from playtester.tester.runlog import read_config

    saved = read_config(out)
    if episodes != saved.get("episodes"):
        write_text_atomic(out / "config.yaml", yaml.safe_dump({**saved, "episodes": episodes}, sort_keys=False))
