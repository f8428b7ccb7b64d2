"""`playtester demo`: the whole pipeline on the built-in park, end to end, in one command.

Every training stage runs on a fixed budget of epochs (the profile's), never against the clock,
so the same `--seed` trains the same models on a quiet machine and on a busy one; only the time
each stage takes differs, and each prints it. The detector starts from COCO weights where
torchvision's cache has them, else (no weights to download) trains the compact backbone from
random init (`train detector`'s `--pretrained auto`, which says which); from scratch on shots
framed at sizes it can see it passes 90 % AP50 a class after about 500 steps, hence the default
profile's 1000 shots and 6 epochs (528 steps). The tester
run at the end finds its objects with the detector the demo trained, and its report says so.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import typer
from rich.console import Console

from playtester.cores import give as give_cores
from playtester.errors import UserError
from playtester.options import SEEDS, Choice, Number, OutFolder, Seed, Text, inputs_checked, option, threads_option
from playtester.files import new_folder

console = Console()


@dataclass(frozen=True)
class Profile:
    """The fixed budgets of one demo profile."""

    inspect_demos: int
    """Scripted inspect episodes."""
    path_demos: int
    """Scripted path-following episodes, of `path_steps` steps each."""
    path_steps: int
    shots: int
    """Auto-labelled detection shots."""
    detector_epochs: int
    """Passes of `train detector` over its training split."""
    encoder_epochs: int
    """Passes of `train encoder` over the demos' frame pairs."""
    policy_epochs: int
    """Most epochs of each `train policy` (its early stopping, seeded, may end sooner)."""
    run_episodes: int
    run_steps: int
    detector_options: tuple[str, ...] = ()
    """More `train detector` options."""
    encoder_options: tuple[str, ...] = ()
    """More `train encoder` options."""
    policy_options: tuple[str, ...] = ()
    """More `train policy` options (the policy's shape)."""


PROFILES = {
    "default": Profile(inspect_demos=24, path_demos=12, path_steps=300, shots=1000, detector_epochs=6, encoder_epochs=3,
                       policy_epochs=8, run_episodes=2, run_steps=400),
    "smoke": Profile(inspect_demos=5, path_demos=3, path_steps=60, shots=40, detector_epochs=1, encoder_epochs=1,
                     policy_epochs=1, run_episodes=1, run_steps=60,
                     encoder_options=("--image-size", "64", "--feature-dim", "32"),
                     policy_options=("--global-hidden", "32", "--local-hidden", "16")),
}


def demo(
    out: Path = option(OutFolder(), Path("playtester-demo"), "--out", help="Folder for demos, shots, models and the run."),
    game: str = option(Text(), "doom:park:1", "--game", help="The park to play (doom:park[:SEED[:COLSxROWS]])."),
    profile: str = option(Choice(*PROFILES), "default", "--profile", help="default, or smoke (tiny, for checking the install)."),
    seed: int = option(Seed(high=SEEDS - 1000), 0, "--seed", help="Seed of every stage: the same seed trains the same models (the path demos use seed + 1000)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start again if the folder exists."),
    minutes: Optional[float] = option(
        Number(), None, "--minutes", help="No longer used: the training stages run on each profile's fixed budgets (said when given)."),
    threads: int = threads_option(),
) -> None:
    """Run the whole pipeline on the built-in park: scripted tester demos, auto-labelled shots,
    the detector, the feature encoder, the inspect and path policies (each on its profile's fixed
    number of epochs, reproducible by --seed), a short tester run that finds its objects with the
    trained detector, and the report. Prints each stage's time and where the report is."""
    give_cores(threads)  # inherited by each stage (PLAYTESTER_THREADS)
    if not game.startswith("doom:park"):
        raise UserError(f"--game {game}: the demo needs the built-in park (doom:park[:SEED[:COLSxROWS]])")
    if minutes is not None:
        console.print(f"--minutes {minutes:g} is no longer used: the demo trains on the {profile} profile's fixed epochs")
    if out.exists() and not overwrite:
        raise UserError(f"--out {out}: it exists; give --overwrite to start again, or another --out")
    inputs_checked()
    with new_folder(out, replace=overwrite, kept=lambda: any((out / "demos").rglob("meta.json"))):
        for sub in ("demos", "models", "runs"):
            (out / sub).mkdir(parents=True)
        times = run_stages(PROFILES[profile], game, seed, out)
    console.rule("[bold]7/7 done")
    summary = json.loads((out / "runs" / "demo" / "summary.json").read_text())
    console.print(f"the tester run tested {summary['oois_tested']} OOIs found by {summary['objects_found_by']}", soft_wrap=True)
    console.print("stage times: " + ", ".join(f"{name} {s:.0f} s" for name, s in times.items()))
    console.print(f"the whole pipeline took {sum(times.values()) / 60:.1f} minutes")
    console.print(f"report: {out / 'runs' / 'demo' / 'report.html'}", soft_wrap=True)  # a path to copy whole


class Stage(NamedTuple):
    """One step of the demo: a `playtester` command line."""

    title: str
    name: str
    """Short name for the closing line of stage times."""
    args: list[str]


def stages(p: Profile, game: str, seed: int, out: Path) -> list[Stage]:
    """The demo's command lines, in order, writing into `out`."""
    models, demos = out / "models", out / "demos"

    def stage(title: str, name: str, *args: object) -> Stage:
        return Stage(title, name, [str(a) for a in args])

    return [
        stage("1/7 scripted tester demos: inspect", "inspect demos", "demos", "--game", game, "--behavior", "inspect",
              "--episodes", p.inspect_demos, "--seed", seed, "--out", demos / "inspect"),
        stage("1/7 scripted tester demos: path", "path demos", "demos", "--game", game, "--behavior", "path",
              "--episodes", p.path_demos, "--steps", p.path_steps, "--seed", seed + 1000, "--out", demos / "path"),
        stage("2/7 auto-labelled detection shots", "shots", "shots", "--game", game, "--n", p.shots, "--seed", seed,
              "--out", out / "shots"),
        stage("3/7 detector", "detector", "train", "detector", "--coco", out / "shots" / "labels.json",
              "--out", models / "detector.ckpt", "--image-size", 128,
              "--epochs", p.detector_epochs, "--seed", seed, *p.detector_options),
        stage("4/7 feature encoder (masked inverse dynamics)", "encoder", "train", "encoder", "--demos", demos,
              "--out", models / "encoder.ckpt", "--epochs", p.encoder_epochs, "--seed", seed, *p.encoder_options),
        *(stage(f"5/7 {behavior} policy", f"{behavior} policy", "train", "policy", "--demos", demos / behavior,
                "--encoder", models / "encoder.ckpt", "--out", models / f"{behavior}.ckpt", "--epochs", p.policy_epochs,
                "--seed", seed, *p.policy_options) for behavior in ("inspect", "path")),
        stage("6/7 tester run (the PPGTA explorer, trained as it plays; OOIs found by the trained detector)", "tester run",
              "run", "explore", "--game", game, "--tester", models / "inspect.ckpt", "--preference", models / "path.ckpt",
              "--detector", models / "detector.ckpt", "--texture-reference", out / "shots" / "labels.json",
              "--episodes", p.run_episodes, "--steps", p.run_steps, "--seed", seed, "--out", out / "runs" / "demo"),
    ]


command_line: Callable[[list[str]], int] | None = None
"""Runs one command line (`playtester.cli.main`), handed over by the command line when it
registers this command: each stage is the command a user would type, and importing the command
line from here would be an import loop."""


def run_stages(p: Profile, game: str, seed: int, out: Path) -> dict[str, float]:
    """Every stage of the demo into `out`, in order; returns each stage's seconds. Each stage
    starts on torch's thread count of the start (a run sets it to 1 for its games), so that a
    stage's command run on its own trains the same model."""
    import torch

    if command_line is None:
        raise RuntimeError("the demo's stages run through playtester.cli, which hands over its main()")
    threads = torch.get_num_threads()
    times: dict[str, float] = {}
    for title, name, args in stages(p, game, seed, out):
        console.rule(f"[bold]{title}")
        started = time.time()
        torch.set_num_threads(threads)
        code = command_line(args)
        if code != 0:
            raise UserError(f"demo: the stage '{title}' failed (exit {code}); see above")
        times[name] = time.time() - started
        console.print(f"[dim]({title}: {times[name]:.0f} s)[/]")
    torch.set_num_threads(threads)
    return times
