"""`playtester plan run | record | from-text`: explicit test plans."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from playtester.capture.errors import UserError
from playtester.commands.scenario import check_out_parent

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


@plan_app.command("run")
def run_plan(
    plan: Path = typer.Argument(..., help="The plan (YAML)."),
    game: str = typer.Option(..., "--game", help="Game spec (see `playtester games`)."),
    out: Path = typer.Option(..., "--out", help="Folder for the plan report, failures and trajectory."),
    detector: str = typer.Option("ground-truth", "--detector", help="Detector checkpoint, or ground-truth (the engine's labels; park only)."),
    validations: Optional[str] = typer.Option(None, "--validations", help="Validation callbacks: file.py or a module, with `registry` or `register(registry)`."),
    behavior: List[str] = typer.Option([], "--behavior", help="A named behaviour NAME=CHECKPOINT (repeatable), e.g. inspect=models/inspect.ckpt."),
    path_policy: Optional[Path] = typer.Option(None, "--path-policy", help="Path policy checkpoint to wander with while searching by sight."),
    max_steps: int = typer.Option(3000, "--max-steps", min=1, help="Steps for the whole plan."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """Play a plan: reach each node's target, act, let rules interrupt, validate every action.
    Exit status 0 when the plan passes, 1 when a node or rule failed (see plan_report.html)."""
    from playtester.capture.games import make_game
    from playtester.capture.park.layout import OOI_KINDS
    from playtester.plans.report import write_plan_report
    from playtester.plans.runner import PlanRunner, RunnerConfig
    from playtester.plans.schema import load_plan
    from playtester.plans.validation import ValidationRegistry, load_validations
    from playtester.tester import GroundTruthDetector, ModelDetector

    the_plan = load_plan(plan)
    registry = load_validations(validations) if validations else ValidationRegistry()
    check_out_parent(out)
    if out.exists():
        if not overwrite:
            raise UserError(f"--out {out}: the folder exists; give --overwrite to replace it")
        shutil.rmtree(out)
    env = make_game(game, max_steps=max_steps + 1)
    try:
        keymap = env.unwrapped.keymap
        behaviors = _behaviors(behavior, the_plan.behaviors, keymap)
        search = _behaviors([f"path={path_policy}"], {}, keymap)["path"] if path_policy else None
        layout = getattr(getattr(env.unwrapped, "scenario", None), "layout", None)
        if detector == "ground-truth":
            if layout is None:
                raise UserError(f"--detector ground-truth: {game} has no ground truth; give a trained detector checkpoint")
            detect, classes = GroundTruthDetector(), list(OOI_KINDS)
        else:
            from playtester.perception.detector import load_detector

            model = load_detector(detector)
            detect, classes = ModelDetector(model, layout.oois if layout else ()), list(model.classes)
        result = PlanRunner(env, the_plan, detector=detect, out=out, game=game, game_options={"max_steps": max_steps + 1},
                            classes=classes, registry=registry, behaviors=behaviors, search=search,
                            config=RunnerConfig(max_steps=max_steps)).run()
    finally:
        env.close()
    report = write_plan_report(out, result)
    failed = [r for r in result.nodes + result.rules if not r.passed]
    if result.passed:
        console.print(f"plan {the_plan.name} PASSED: {len(result.nodes)} nodes, {len(result.rules)} rule firings, "
                      f"{result.steps} steps; report {report}")
        return
    first = failed[0]
    console.print(f"plan {the_plan.name} FAILED: {len(failed)} of {len(result.nodes) + len(result.rules)} nodes and rule "
                  f"firings; first: {first.kind} {first.index + 1} ({first.name}): {first.reasons[0]}; report {report}")
    raise typer.Exit(1)


@plan_app.command("record")
def record_plan(
    episode: Path = typer.Argument(..., help="A demo episode folder (from `playtester record` or `playtester demos`)."),
    out: Path = typer.Option(..., "--out", help="The plan to write (YAML)."),
    every: int = typer.Option(15, "--every", min=1, help="With telemetry: a position node every this many steps."),
    tolerance: float = typer.Option(96.0, "--tolerance", help="Each node's tolerance in map units."),
) -> None:
    """Make a plan from a recorded session: positions sampled periodically and every non-movement
    action (with telemetry), else the objects approached along the way."""
    from playtester.plans.record import RecordConfig, plan_from_episode
    from playtester.plans.schema import save_plan

    check_out_parent(out)
    plan = plan_from_episode(episode, RecordConfig(every=every, tolerance=tolerance))
    save_plan(plan, out)
    console.print(f"wrote {out}: {len(plan.nodes)} nodes from {episode}")


@plan_app.command("from-text")
def plan_from_text_command(
    steps: Path = typer.Argument(..., help="A text file, one step a line ('Walk to the barrel.', 'Attack any enemy you see.')."),
    out: Path = typer.Option(..., "--out", help="The plan to write (YAML)."),
    keymap: str = typer.Option("default", "--keymap", help="Key map whose actions the verbs map to (default, or a YAML file)."),
    classes: str = typer.Option("pillar,barrel,tire,chair", "--classes", help="Detector classes the nouns map to, comma-separated."),
    behaviors: str = typer.Option("inspect", "--behaviors", help="Named behaviours the verbs may map to, comma-separated."),
) -> None:
    """Make a plan from plain-text steps: each line a node, or a rule when it says 'any'/'whenever'."""
    from playtester.capture.keymap import load_keymap
    from playtester.plans.schema import save_plan
    from playtester.plans.text import plan_from_text

    check_out_parent(out)
    names = [c.strip() for c in classes.split(",") if c.strip()]
    if not names:
        raise UserError("--classes: give at least one class name")
    plan = plan_from_text(steps, actions=load_keymap(keymap).names, classes=names,
                          behaviors=[b.strip() for b in behaviors.split(",") if b.strip()])
    save_plan(plan, out)
    console.print(f"wrote {out}: {len(plan.nodes)} nodes, {len(plan.rules)} rules from {steps}")
