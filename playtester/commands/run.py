"""`playtester run`: the tester on a game — explore, detect, test, find bugs, report."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import List, Optional

import typer
import yaml
from rich.console import Console

from playtester.capture.atomic import write_text_atomic
from playtester.capture.errors import UserError
from playtester.commands.scenario import check_out_parent, progress

console = Console()

KEPT_ON_RESUME = ("game", "explorer", "tester", "preference", "detector", "num_envs", "rollout", "seed", "steps", "objective")
"""Options a resumed run must keep: the logs and the explorer's checkpoint were made with them."""


def run(
    game: str = typer.Option(..., "--game", help="Game spec (see `playtester games`)."),
    tester: Path = typer.Option(..., "--tester", help="Test policy checkpoint (e.g. the inspect policy)."),
    out: Path = typer.Option(..., "--out", help="Run folder, e.g. runs/r1 (refused if it exists, unless --resume or --overwrite)."),
    preference: Optional[Path] = typer.Option(None, "--preference", help="Path-following policy checkpoint: the explorer starts from it and is rewarded for keeping its style (needed by --explorer ppgta)."),
    explorer: str = typer.Option("ppgta", "--explorer", help="ppgta (PPO with RND novelty + the path policy's preference, trained online), inspector (PPO with single-predictor RND, the baseline), or random."),
    detector: str = typer.Option("ground-truth", "--detector", help="Detector checkpoint, or ground-truth (the engine's labels; park only)."),
    episodes: int = typer.Option(3, "--episodes", min=1, help="Episodes in the whole run, each from a random start."),
    steps: int = typer.Option(500, "--steps", min=1, help="Game steps per episode (test steps included)."),
    envs: int = typer.Option(2, "--envs", min=1, help="Game instances played at once by the PPO explorer, one process each."),
    rollout: int = typer.Option(64, "--rollout", min=1, help="PPO steps per game instance between updates."),
    texture_reference: Optional[Path] = typer.Option(None, "--texture-reference", help="COCO labels of healthy OOIs for the texture oracle."),
    assertions: List[str] = typer.Option([], "--assert", help="A user assertion, module:function or file.py:function (repeatable)."),
    stuck_steps: int = typer.Option(40, "--stuck-steps", min=1, help="Steps of unchanged picture under input that count as stuck."),
    test_steps: Optional[int] = typer.Option(None, "--test-steps", help="Steps of one OOI test (default: the test policy's demo length)."),
    seed: int = typer.Option(0, "--seed", help="Seed of starts, action sampling and PPO."),
    objective: str = typer.Option("coverage", "--objective", help="coverage (the explorer's own reward) or load (plus RELINE's reward for frame-rate drops: load testing)."),
    load_threshold: Optional[Path] = typer.Option(None, "--load-threshold", help="With --objective load: a threshold file (load_threshold.json of an earlier run); default: measured by random play first."),
    load_area: str = typer.Option("everywhere", "--load-area", help="With --objective load: where frame-rate drops are rewarded, everywhere or pathways."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run that was interrupted (the explorer from its last checkpoint)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete an existing run folder first."),
) -> None:
    """Run the tester: explore the game (the PPO explorer learns as it plays), test every OOI it
    finds with the test policy, judge textures, watch for crashes, stuck states and failed
    assertions; then write the report. Ctrl-C keeps everything written; --resume continues."""
    from playtester.capture.games import make_game
    from playtester.imitation.live import load_policy
    from playtester.oracles import TextureOracle, load_assertion
    from playtester.report import build_report
    from playtester.runner import RunSpec, episodes_left, explore_at_random, explore_with_ppo, make_detector

    if resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other; give one")
    spec = RunSpec(game=game, tester=str(tester), run_dir=str(out), explorer=explorer,
                   preference=str(preference) if preference else None, detector=detector, episodes=episodes,
                   steps=steps, num_envs=envs, rollout=rollout,
                   texture_reference=str(texture_reference) if texture_reference else None,
                   assertions=list(assertions), stuck_steps=stuck_steps, test_steps=test_steps, seed=seed,
                   objective=objective, load_threshold=str(load_threshold) if load_threshold else None, load_area=load_area)
    check_out_parent(out)
    if out.exists() and not resume:
        if not overwrite:
            raise UserError(f"--out {out}: the run folder exists; give --resume to continue it or --overwrite to replace it")
        shutil.rmtree(out)
    if resume:
        check_same_run(out, spec.to_config())

    # Everything that can be refused is refused before the run folder is written.
    live = load_policy(tester)
    if texture_reference:
        TextureOracle.from_coco(texture_reference)
    for a in assertions:
        load_assertion(a)
    env = make_game(game, max_steps=steps)
    try:
        if not env.unwrapped.keymap.same_actions(live.keymap):
            raise UserError(
                f"--tester {tester}: trained with the key map ({', '.join(live.keymap.names)}), but {game} uses "
                f"({', '.join(env.unwrapped.keymap.names)}); train the test policy on demos from this game"
            )
        make_detector(spec, env)
    finally:
        env.close()

    out.mkdir(exist_ok=True)
    if not resume:
        write_text_atomic(out / "config.yaml", yaml.safe_dump(spec.to_config(), sort_keys=False))
    already = episodes - episodes_left(spec)
    with progress() as bar:
        task = bar.add_task(f"episodes ({explorer} explorer)", total=episodes, completed=already)

        def advance(ended: int) -> None:
            bar.update(task, completed=min(episodes, already + ended))

        if explorer == "random":
            explore_at_random(spec, advance)
        else:
            result = explore_with_ppo(spec, advance, resume=resume)
            console.print(f"explorer: {result.global_step} steps trained, checkpoint {result.checkpoint}")
        bar.update(task, completed=episodes - episodes_left(spec))
    report = build_report(out)
    console.print(f"wrote {out} (trajectory, tests, findings) and the report {report}")


def check_same_run(out: Path, now: dict) -> None:
    """Refuse a --resume whose options differ from the interrupted run's (except the budget)."""
    from playtester.runlog import read_config

    if not (out / "config.yaml").exists():
        raise UserError(f"--resume: {out} holds no run to continue (no config.yaml)")
    saved = read_config(out)
    for key in KEPT_ON_RESUME:
        if key in saved and saved[key] != now[key]:
            raise UserError(f"--resume: {out} was run with {key.replace('_', '-')}={saved[key]!r}, now {now[key]!r}; "
                            "give the same options (only --episodes may grow), or start a new run")
    if now["episodes"] != saved.get("episodes"):
        write_text_atomic(out / "config.yaml", yaml.safe_dump({**saved, "episodes": now["episodes"]}, sort_keys=False))
