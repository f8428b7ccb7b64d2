"""`playtester demo`: the whole pipeline on the built-in park, end to end, in one command."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console

from playtester.capture.errors import UserError

console = Console()


@dataclass(frozen=True)
class Profile:
    inspect_demos: int
    path_demos: int
    path_steps: int
    shots: int
    run_episodes: int
    run_steps: int
    share: dict[str, float]
    """Share of the time budget for each training stage."""
    policy_shape: tuple[str, ...] = ()


PROFILES = {
    "default": Profile(24, 12, 300, 400, 2, 400, {"detector": 0.25, "encoder": 0.2, "inspect": 0.15, "path": 0.15}),
    "smoke": Profile(5, 3, 60, 24, 1, 60, {"detector": 0.1, "encoder": 0.1, "inspect": 0.05, "path": 0.05},
                     ("--global-hidden", "32", "--local-hidden", "16")),
}


def demo(
    out: Path = typer.Option(Path("playtester-demo"), "--out", help="Folder for demos, shots, models and the run."),
    game: str = typer.Option("doom:park:1", "--game", help="The park to play (doom:park[:SEED[:COLSxROWS]])."),
    minutes: float = typer.Option(12.0, "--minutes", help="Time budget for the training stages together."),
    profile: str = typer.Option("default", "--profile", help="default, or smoke (tiny, for checking the install)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start again if the folder exists."),
) -> None:
    """Run the whole pipeline on the built-in park: scripted tester demos, auto-labelled shots,
    the detector, the feature encoder, the inspect and path policies, a short tester run, and
    the report. Prints where the report is."""
    from playtester.cli import main

    if profile not in PROFILES:
        raise UserError(f"--profile {profile!r}: use {' or '.join(PROFILES)}")
    if not game.startswith("doom:park"):
        raise UserError(f"--game {game}: the demo needs the built-in park (doom:park[:SEED[:COLSxROWS]])")
    p = PROFILES[profile]
    if out.exists():
        if not overwrite:
            raise UserError(f"--out {out}: it exists; give --overwrite to start again, or another --out")
        shutil.rmtree(out)
    if not out.parent.exists():
        raise UserError(f"--out {out}: its parent folder {out.parent} does not exist; create it first")
    for sub in ("demos", "models", "runs"):
        (out / sub).mkdir(parents=True)
    t0 = time.time()

    def stage(title: str, *args: object) -> None:
        console.rule(f"[bold]{title}")
        started = time.time()
        code = main([str(a) for a in args])
        if code != 0:
            raise UserError(f"demo: the stage '{title}' failed (exit {code}); see above")
        console.print(f"[dim]({title}: {time.time() - started:.0f} s)[/]")

    budget = {k: max(0.2, minutes * v) for k, v in p.share.items()}
    stage("1/7 scripted tester demos: inspect", "demos", "--game", game, "--behavior", "inspect",
          "--episodes", p.inspect_demos, "--out", out / "demos" / "inspect")
    stage("1/7 scripted tester demos: path", "demos", "--game", game, "--behavior", "path", "--episodes", p.path_demos,
          "--steps", p.path_steps, "--seed", 1000, "--out", out / "demos" / "path")
    stage("2/7 auto-labelled detection shots", "shots", "--game", game, "--n", p.shots, "--out", out / "shots")
    detector = out / "models" / "detector.ckpt"
    common = ["--coco", out / "shots" / "labels.json", "--out", detector, "--backbone", "mobilenet", "--image-size", 128,
              "--max-minutes", budget["detector"]]
    run_detector: object = detector
    try:
        stage("3/7 detector (COCO weights)", "train", "detector", *common, "--pretrained", "coco")
    except UserError:
        # From scratch a Faster R-CNN needs hours on a CPU (0 % AP after 3 minutes here): train
        # it briefly to show the stage, and let the run see through the engine's labels.
        console.print("COCO weights cannot be had here: a short training from scratch (--pretrained none) shows the "
                      "stage, but from scratch the detector needs hours, so the tester run below uses the engine's "
                      "labels (--detector ground-truth). Put the COCO weights in torchvision's cache to use the trained one.")
        common[common.index("--max-minutes") + 1] = max(0.2, minutes * p.share["detector"] / 3)
        stage("3/7 detector (from scratch)", "train", "detector", *common, "--pretrained", "none")
        run_detector = "ground-truth"
    encoder = out / "models" / "encoder.ckpt"
    stage("4/7 feature encoder (masked inverse dynamics)", "train", "encoder", "--demos", out / "demos", "--out", encoder,
          "--max-minutes", budget["encoder"])
    for behavior in ("inspect", "path"):
        stage(f"5/7 {behavior} policy", "train", "policy", "--demos", out / "demos" / behavior, "--encoder", encoder,
              "--out", out / "models" / f"{behavior}.ckpt", "--max-minutes", budget[behavior], *p.policy_shape)
    stage("6/7 tester run (the PPGTA explorer, trained as it plays)", "run", "--game", game,
          "--tester", out / "models" / "inspect.ckpt", "--preference", out / "models" / "path.ckpt", "--detector", run_detector,
          "--texture-reference", out / "shots" / "labels.json", "--episodes", p.run_episodes, "--steps", p.run_steps,
          "--out", out / "runs" / "demo")
    console.rule("[bold]7/7 done")
    console.print(f"the whole pipeline took {(time.time() - t0) / 60:.1f} minutes")
    console.print(f"report: {out / 'runs' / 'demo' / 'report.html'}", soft_wrap=True)  # a path to copy whole
