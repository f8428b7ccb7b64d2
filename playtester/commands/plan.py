"""`playtester plan run | record | from-text`: explicit test plans."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from playtester.errors import UserError
from playtester.options import (
    OBJECT_DETECTOR,
    MANY, RULES_HELP, Choice, Count, InFile, InFolder, NameOrFile, Number, OutFile, OutFolder, Text, about, argument, inputs_checked, option,
)
from playtester.files import holds_lines, new_folder

console = Console()

plan_app = typer.Typer(help="Explicit test plans: run one, or make one from a demo episode or from text.",
                       no_args_is_help=True)


def _behaviors(specs: list[str], from_plan: dict[str, str], keymap) -> dict:
    """Named behaviours (`name=checkpoint`), the command line's over the plan's, loaded and checked."""
    from playtester.imitation.live import load_policy

    paths = dict(from_plan)
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UserError(f"--behavior {spec!r}: write it as NAME=CHECKPOINT, e.g. inspect=models/inspect.ckpt")
        paths[name] = path
    loaded = {}
    for name, path in paths.items():
        if not Path(path).is_file():
            raise UserError(f"behaviour {name!r}: checkpoint {path} not found")
        policy = load_policy(path)
        if not policy.keymap.same_actions(keymap):
            raise UserError(f"behaviour {name!r} ({path}): trained with another key map ({', '.join(policy.keymap.names)}); "
                            "train it on demos from this game")
        loaded[name] = policy
    return loaded


def _looks_for_objects(plan) -> bool:
    """Whether a plan needs to see objects: a node aimed at an OOI kind or id, or a `see:` rule."""
    targets = any(n.target is not None and n.target.position is None for n in plan.nodes)
    return targets or any(c.see is not None for r in plan.rules for c in r.when)


def _plan_detector(env, game: str, detector: str | None, oracle_labels: bool):
    """What finds the plan's objects, and the classes it knows (None: any class, nothing is seen)."""
    from playtester.capture.park.layout import OOI_KINDS
    from playtester.tester.object_source import ORACLE_LABELS, describe_detector
    from playtester.tester.loop import GroundTruthDetector, ModelDetector, NoDetector

    layout = getattr(getattr(env.unwrapped, "scenario", None), "layout", None)
    if oracle_labels:
        if layout is None:
            raise UserError(f"--oracle-labels: {game} has no engine labels to find objects with (only the built-in park "
                            "has); give --detector with a trained detector checkpoint")
        return GroundTruthDetector(description=ORACLE_LABELS), list(OOI_KINDS)
    if detector is None:
        return NoDetector(description="nothing (the plan looks for no object)"), None
    from playtester.perception.detector import load_detector

    model = load_detector(detector)
    return ModelDetector(model, layout.oois if layout else (), description=describe_detector(detector)), list(model.classes)


def window_harness(game: str, launch: str | None, reset: str | None) -> dict:
    """`make_game` options of a window game's harness (--launch, --reset), checked before anything starts."""
    from playtester.tester.spec import check_harness, harness_options

    given = [name for name, value in (("--launch", launch), ("--reset", reset)) if value is not None]
    if given and not game.startswith("window:"):
        raise UserError(f"{given[0]}: only a window game (window:TITLE) is launched and reset by keys; {game} is started by playtester itself")
    check_harness(launch, reset, [])
    return harness_options(launch, reset, [])


@plan_app.command("run")
def run_plan(
    plan: Path = argument(InFile("plan (YAML)"), "plan", help="The plan (YAML)."),
    game: str = option(Text(), ..., "--game", help="Game spec (see `playtester games`)."),
    out: Path = option(OutFolder(), ..., "--out", help="Folder for the plan report, failures and trajectory."),
    detector: Optional[str] = option(OBJECT_DETECTOR, None, "--detector", help="Detector checkpoint that finds the plan's objects (kind and ooi targets, see: rules); a plan that looks for objects refuses to start without it or --oracle-labels."),
    oracle_labels: bool = typer.Option(False, "--oracle-labels", help="Find objects through the engine's labels instead of a detector (the built-in park only): an ablation, and the report says so."),
    validations: Optional[str] = option(Text(), None, "--validations", help="Validation callbacks: file.py or a module, with `registry` or `register(registry)`."),
    behavior: List[str] = option(Text(), [], "--behavior", help="A named behaviour NAME=CHECKPOINT (repeatable), e.g. inspect=models/inspect.ckpt."),
    path_policy: Optional[Path] = option(InFile("path policy checkpoint"), None, "--path-policy", help="Path policy checkpoint to wander with while searching by sight."),
    max_steps: int = option(Count(1, MANY), 3000, "--max-steps", help="Steps for the whole plan."),
    ground_truth_positions: bool = typer.Option(
        False, "--ground-truth-positions", help="Walk to a target object's position from the engine's ground truth (the built-in "
        "park's layout) before looking for it: an ablation, and the report says so. Without it objects are found by sight."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
    rules: Optional[str] = option(Choice("immortal", "no-monsters", "play"), None, "--rules", help=RULES_HELP),
    launch: Optional[str] = option(Text(), None, "--launch", help="A window game: the command that starts it (started here, ended with the plan, also if playtester is killed)."),
    reset: Optional[str] = option(Text(), None, "--reset", help="A window game: its reset recipe, played before the plan starts: a reset plan (YAML) or the keys themselves, e.g. \"y 10 down enter 20\" (docs/your-own-game.md)."),
) -> None:
    """Play a plan: reach each node's target, act, let rules interrupt, validate every action.
    Exit status 0 when the plan passes, 1 when a node or rule failed (see plan_report.html)."""
    from playtester.capture.envs import make_env
    from playtester.tester.object_source import check_object_source
    from playtester.plans.report import write_plan_report
    from playtester.plans.runner import PlanRunner, RunnerConfig
    from playtester.datasets.plans import load_plan
    from playtester.plans.validation import ValidationRegistry, load_validations

    from playtester.capture.rules import check_rules, is_level
    from playtester.tester.spec import policy_keymap

    rules = check_rules(rules, game)
    the_plan = load_plan(plan)
    harness = window_harness(game, launch, reset)
    check_object_source(detector, oracle_labels, needed=_looks_for_objects(the_plan), needed_by=f"plan {plan} (it looks for objects)")
    registry = load_validations(validations) if validations else ValidationRegistry()
    _check_path_policy(path_policy)
    if out.exists() and not overwrite:
        raise UserError(f"--out {out}: the folder exists; give --overwrite to replace it")
    policies = [b.partition("=")[2] for b in behavior] + list(the_plan.behaviors.values()) + [path_policy]
    keymap = policy_keymap(*policies) if is_level(game) else None  # a level plays with its policies' key map
    options = {"max_steps": max_steps + 1, **({"rules": rules} if rules else {}), **({"keymap": keymap} if keymap else {}), **harness}
    env = make_env(game, game_options=options)
    try:
        keymap = env.unwrapped.keymap
        behaviors = _behaviors(behavior, the_plan.behaviors, keymap)
        with about("--path-policy"):
            search = _behaviors([f"path={path_policy}"], {}, keymap)["path"] if path_policy else None
        detect, classes = _plan_detector(env, game, detector, oracle_labels)
        runner = PlanRunner(env, the_plan, detector=detect, out=out, game=game, game_options={"max_steps": max_steps + 1},
                            classes=classes, registry=registry, behaviors=behaviors, search=search,
                            config=RunnerConfig(max_steps=max_steps, ground_truth_positions=ground_truth_positions))
        inputs_checked()
        with new_folder(out, replace=overwrite, kept=functools.partial(holds_lines, out / "trajectory.jsonl")):
            result = runner.run()  # a start the game lacks is refused before it writes
            report = write_plan_report(out, result)
    finally:
        env.close()
    _say_plan_result(the_plan.name, result, report)


def _check_path_policy(path_policy: Path | None) -> None:
    """Load --path-policy once before the game starts, so that a bad checkpoint is refused in one
    line naming the option rather than after the game is up."""
    if path_policy is not None:
        from playtester.imitation.live import load_policy

        with about("--path-policy"):  # a bad checkpoint is refused before the game starts
            load_policy(path_policy)


def _say_plan_result(name: str, result, report: Path) -> None:
    """One line: the plan passed, or how many nodes and rule firings failed and the first one's
    reason; exit status 1 when it failed."""
    failed = [r for r in result.nodes + result.rules if not r.passed]
    if result.passed:
        console.print(f"plan {name} PASSED: {len(result.nodes)} nodes, {len(result.rules)} rule firings, "
                      f"{result.steps} steps; report {report}")
        return
    first = failed[0]
    console.print(f"plan {name} FAILED: {len(failed)} of {len(result.nodes) + len(result.rules)} nodes and rule "
                  f"firings; first: {first.kind} {first.index + 1} ({first.name}): {first.reasons[0]}; report {report}")
    raise typer.Exit(1)


@plan_app.command("record")
def record_plan(
    episode: Path = argument(InFolder("demo episode folder"), "episode", help="A demo episode folder (from `playtester record` or `playtester demos`)."),
    out: Path = option(OutFile(".yaml"), ..., "--out", help="The plan to write (YAML)."),
    every: int = option(Count(1, MANY), 15, "--every", help="With telemetry: a position node every this many steps."),
    tolerance: float = option(Number(0.0, 1_000_000.0, above=True), 96.0, "--tolerance", help="Each node's tolerance in map units."),
) -> None:
    """Make a plan from a recorded session: positions sampled periodically and every non-movement
    action (with telemetry), else the objects approached along the way."""
    from playtester.plans.record import RecordConfig, plan_from_episode
    from playtester.datasets.plans import save_plan

    plan = plan_from_episode(episode, RecordConfig(every=every, tolerance=tolerance))
    inputs_checked()
    save_plan(plan, out)
    console.print(f"wrote {out}: {len(plan.nodes)} nodes from {episode}")


@plan_app.command("from-text")
def plan_from_text_command(
    steps: Path = argument(InFile("text file of steps"), "steps", help="A text file, one step a line ('Walk to the barrel.', 'Attack any enemy you see.')."),
    out: Path = option(OutFile(".yaml"), ..., "--out", help="The plan to write (YAML)."),
    keymap: str = option(NameOrFile(("default",), "key map YAML"), "default", "--keymap", help="Key map whose actions the verbs map to (default, or a YAML file)."),
    classes: str = option(Text(), "pillar,barrel,tire,chair", "--classes", help="Detector classes the nouns map to, comma-separated."),
    behaviors: str = option(Text(), "inspect", "--behaviors", help="Named behaviours the verbs may map to, comma-separated."),
) -> None:
    """Make a plan from plain-text steps: each line a node, or a rule when it says 'any'/'whenever'."""
    from playtester.capture.keymap import load_keymap
    from playtester.datasets.plans import save_plan
    from playtester.plans.text import plan_from_text

    names = [c.strip() for c in classes.split(",") if c.strip()]
    if not names:
        raise UserError("--classes: give at least one class name")
    with about("--keymap"):
        actions = load_keymap(keymap).names
    plan = plan_from_text(steps, actions=actions, classes=names,
                          behaviors=[b.strip() for b in behaviors.split(",") if b.strip()])
    inputs_checked()
    save_plan(plan, out)
    console.print(f"wrote {out}: {len(plan.nodes)} nodes, {len(plan.rules)} rules from {steps}")
