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
    tester: Optional[Path] = typer.Option(None, "--tester", help="Test policy checkpoint (e.g. the inspect policy); without it the run explores and watches the oracles, testing no OOI."),
    out: Path = typer.Option(..., "--out", help="Run folder, e.g. runs/r1 (refused if it exists, unless --resume or --overwrite)."),
    preference: Optional[Path] = typer.Option(None, "--preference", help="Path-following policy checkpoint: the explorer starts from it and is rewarded for keeping its style (needed by --explorer ppgta)."),
    explorer: str = typer.Option("ppgta", "--explorer", help="ppgta (PPO with RND novelty + the path policy's preference, trained online), inspector (PPO with single-predictor RND, the baseline), random, or evolve (Wuji: a population evolved for exploration and winning, offspring refined by PPO; crash, stuck and assertion oracles on every evaluation)."),
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
    map_image: Optional[Path] = typer.Option(None, "--map", help="Bird's-eye map image of a game without built-in ground truth (a window game with telemetry)."),
    map_bounds: Optional[str] = typer.Option(None, "--map-bounds", help="X0,Y0,X1,Y1: the world area (telemetry units) the --map image shows."),
    telemetry_port: Optional[int] = typer.Option(None, "--telemetry-port", help="A window game's UDP port for JSON-line telemetry from its dev build (pos, angle, fps)."),
    oois: Optional[Path] = typer.Option(None, "--oois", help="JSON list of the known OOIs ({id, kind, x, y}): detections are matched to them by telemetry and the report draws them."),
    reward: Optional[str] = typer.Option(None, "--reward", help="evolve: the winning score's reward, module:function or file.py:function over (frame, info); needed where the game has none (a window, the park)."),
    population: int = typer.Option(30, "--population", min=2, help="evolve: policies in the population."),
    generations: int = typer.Option(10, "--generations", min=1, help="evolve: generations to run."),
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
    if explorer == "evolve":  # its own loop: no test policy, no detector (playtester/evolve.py)
        from playtester.evolve import run_evolve_command

        check_out_parent(out)
        run_evolve_command(game=game, out=out, reward=reward, population=population, generations=generations, steps=steps,
                           envs=envs, assertions=assertions, stuck_steps=stuck_steps, seed=seed, resume=resume,
                           overwrite=overwrite, log=console.print)
        console.print(f"wrote {out} (generations, findings) and the report {build_report(out)}")
        return
    spec = RunSpec(game=game, tester=str(tester) if tester else None, run_dir=str(out), explorer=explorer,
                   preference=str(preference) if preference else None, detector=detector, episodes=episodes,
                   steps=steps, num_envs=envs, rollout=rollout,
                   texture_reference=str(texture_reference) if texture_reference else None,
                   assertions=list(assertions), stuck_steps=stuck_steps, test_steps=test_steps, seed=seed,
                   objective=objective, load_threshold=str(load_threshold) if load_threshold else None, load_area=load_area,
                   map=str(map_image.resolve()) if map_image else None, map_bounds=parse_bounds(map_bounds),
                   oois=str(oois.resolve()) if oois else None, telemetry_port=telemetry_port)
    check_out_parent(out)
    if out.exists() and not resume:
        if not overwrite:
            raise UserError(f"--out {out}: the run folder exists; give --resume to continue it or --overwrite to replace it")
        shutil.rmtree(out)
    if resume:
        check_same_run(out, spec.to_config())

    # Everything that can be refused is refused before the run folder is written.
    live = load_policy(tester) if tester else None
    if texture_reference:
        TextureOracle.from_coco(texture_reference)
    for a in assertions:
        load_assertion(a)
    env = make_game(game, **spec.game_options())
    try:
        if live is not None and not env.unwrapped.keymap.same_actions(live.keymap):
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

        if already >= episodes:
            console.print(f"every one of the {episodes} episodes was played (an interrupted one is kept as it was); "
                          "give more --episodes to play on")
        elif explorer == "random":
            explore_at_random(spec, advance, say=console.print)
        else:
            result = explore_with_ppo(spec, advance, resume=resume)
            console.print(f"explorer: {result.global_step} steps trained, checkpoint {result.checkpoint}")
        bar.update(task, completed=episodes - episodes_left(spec))
    report = build_report(out)
    console.print(f"wrote {out} (trajectory, tests, findings) and the report {report}")


def parse_bounds(text: str | None) -> list[float] | None:
    """`--map-bounds X0,Y0,X1,Y1` as four numbers."""
    if text is None:
        return None
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 4:
        raise UserError(f"--map-bounds {text!r}: give four numbers X0,Y0,X1,Y1")
    return values


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
