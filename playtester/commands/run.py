"""`playtester run`: the tester on a game — explore, detect, test, find bugs, report."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import List, Optional

import typer
import yaml
from rich.console import Console

from playtester.capture.errors import UserError
from playtester.commands.scenario import check_out_parent, progress

console = Console()

EXPLORERS = ("random",)


def run(
    game: str = typer.Option(..., "--game", help="Game spec (see `playtester games`)."),
    tester: Path = typer.Option(..., "--tester", help="Test policy checkpoint (e.g. the inspect policy)."),
    out: Path = typer.Option(..., "--out", help="Run folder, e.g. runs/r1 (refused if it exists, unless --resume or --overwrite)."),
    detector: str = typer.Option("ground-truth", "--detector", help="Detector checkpoint, or ground-truth (the engine's labels; park only)."),
    explorer: str = typer.Option("random", "--explorer", help="How to explore between tests: random (the PPO explorer is issue 6's)."),
    episodes: int = typer.Option(3, "--episodes", min=1, help="Episodes, each from a random start."),
    steps: int = typer.Option(500, "--steps", min=1, help="Steps per episode (test steps included)."),
    texture_reference: Optional[Path] = typer.Option(None, "--texture-reference", help="COCO labels of healthy OOIs for the texture oracle."),
    assertions: List[str] = typer.Option([], "--assert", help="A user assertion, module:function or file.py:function (repeatable)."),
    stuck_steps: int = typer.Option(40, "--stuck-steps", min=1, help="Steps of unchanged picture under input that count as stuck."),
    test_steps: Optional[int] = typer.Option(None, "--test-steps", help="Steps of one OOI test (default: the test policy's demo length)."),
    seed: int = typer.Option(0, "--seed", help="Seed of starts and action sampling."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run that was interrupted."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete an existing run folder first."),
) -> None:
    """Run the tester: explore the game, test every OOI it finds with the test policy, judge
    textures, watch for crashes, stuck states and failed assertions; then write the report."""
    import numpy as np

    from playtester.capture.games import make_game
    from playtester.imitation.live import load_policy
    from playtester.oracles import AssertionOracle, CrashOracle, StuckOracle, TextureOracle, load_assertion
    from playtester.report import build_report
    from playtester.runlog import read_jsonl
    from playtester.tester import GroundTruthDetector, ModelDetector, TesterConfig, TesterEnv

    if explorer not in EXPLORERS:
        raise UserError(f"--explorer {explorer!r}: use one of {', '.join(EXPLORERS)}")
    if resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other; give one")
    check_out_parent(out)
    if out.exists() and not resume:
        if not overwrite:
            raise UserError(f"--out {out}: the run folder exists; give --resume to continue it or --overwrite to replace it")
        shutil.rmtree(out)
    if resume and not (out / "config.yaml").exists():
        raise UserError(f"--resume: {out} holds no run to continue (no config.yaml)")
    live = load_policy(tester)
    texture = TextureOracle.from_coco(texture_reference) if texture_reference else None
    checks = [load_assertion(a) for a in assertions]
    env = make_game(game, max_steps=steps)
    try:
        if not env.unwrapped.keymap.same_actions(live.keymap):
            raise UserError(
                f"--tester {tester}: trained with the key map ({', '.join(live.keymap.names)}), but {game} uses "
                f"({', '.join(env.unwrapped.keymap.names)}); train the test policy on demos from this game"
            )
        layout = getattr(getattr(env.unwrapped, "scenario", None), "layout", None)
        if detector == "ground-truth":
            if layout is None:
                raise UserError(f"--detector ground-truth: {game} has no ground truth; give a trained detector checkpoint")
            detect = GroundTruthDetector()
        else:
            from playtester.perception.detector import load_detector

            detect = ModelDetector(load_detector(detector), layout.oois if layout else ())
        out.mkdir(exist_ok=True)
        config = {"game": game, "agent": f"{explorer} explorer", "explorer": explorer, "tester": str(tester),
                  "detector": detector, "episodes": episodes, "steps": steps, "seed": seed,
                  "texture_reference": str(texture_reference) if texture_reference else None, "assertions": assertions}
        if not resume:
            (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        done = {r["episode"] for r in read_jsonl(out / "trajectory.jsonl")}
        wrapped = TesterEnv(
            env, tester=live, detector=detect, oracles=[CrashOracle(), StuckOracle(stuck_steps), AssertionOracle(checks)],
            run_dir=out, game=game, game_options={"max_steps": steps}, texture=texture,
            config=TesterConfig(test_steps=test_steps, seed=seed),
        )
        if resume:  # what was played is kept (an interrupted episode too); play the episodes left
            wrapped.local_episode = max(done, default=-1)
            wrapped.tested = {t["ooi"] for t in read_jsonl(out / "tests.jsonl")}
        rng = np.random.default_rng(seed + len(done))
        first = wrapped.local_episode + 1
        try:
            with progress() as bar:
                task = bar.add_task("episodes", total=episodes, completed=first)
                for _ in range(first, episodes):
                    wrapped.reset()
                    for _ in range(steps):
                        _, _, terminated, truncated, _ = wrapped.step(int(rng.integers(env.action_space.n)))
                        if terminated or truncated:
                            break
                    bar.advance(task)
        finally:
            wrapped.close()
    finally:
        env.close()
    report = build_report(out)
    console.print(f"wrote {out} (trajectory, tests, findings) and the report {report}")

