"""`train policy` and `eval policy`: behaviour cloning from demos, and the policy played live."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from playtester.cores import give as give_cores
from playtester.errors import UserError
from playtester.options import (
    MANY, Choice, Count, InFile, InFolder, Number, OutFile, OutFolder, Seed, Size, Text, about, check_memory, inputs_checked, option,
    threads_option,
)

console = Console()
log = logging.getLogger(__name__)


def train_policy(
    demos: list[Path] = option(
        InFolder("folder of demo episodes"), ..., "--demos",
        help="Folder of demo episodes of one behaviour (its subfolders too); repeat it for more folders, e.g. DAgger rounds.",
    ),
    encoder: Path = option(InFile("encoder checkpoint"), ..., "--encoder", help="Feature encoder checkpoint (playtester train encoder)."),
    out: Path = option(OutFile(".ckpt"), ..., "--out", help="Where to write the policy checkpoint."),
    behavior: Optional[str] = option(Text(), None, "--behavior", help="Only episodes with this behaviour tag (default: all)."),
    epochs: int = option(Count(1, MANY), 40, "--epochs", help="Most epochs (early stopping may end sooner)."),
    max_minutes: Optional[float] = option(Number(0.0, 10_000_000.0, above=True), None, "--max-minutes", help="Stop after this many minutes."),
    no_teacher: bool = typer.Option(False, "--no-teacher", help="Ablation: plain behaviour cloning, no DINO teacher."),
    batch_size: int = option(Size(), 8, "--batch-size", help="Episodes per batch."),
    chunk: int = option(Size(MANY), 32, "--chunk", help="Steps per truncated back-propagation chunk."),
    lr: float = option(Number(0.0, 10.0, above=True), 1e-3, "--lr", help="Peak learning rate after warm-up."),
    global_hidden: int = option(Size(), 1024, "--global-hidden", help="Hidden size of the global GRU (paper: 1024)."),
    local_hidden: int = option(Size(), 256, "--local-hidden", help="Hidden size of the local bidirectional GRU (paper: 256)."),
    seed: int = option(Seed(), 0, "--seed", help="Seed of the split and the initial weights."),
    logdir: Optional[Path] = option(OutFolder(), None, "--logdir", help="TensorBoard logs (default: beside --out, in logs/)."),
    init: Optional[Path] = option(
        InFile("policy checkpoint"), None, "--init", help="Start from this policy checkpoint's weights (same shape and encoder), e.g. the last DAgger round's.",
    ),
    idm_weight: float = option(Number(0.0, 1000.0), 1.0, "--idm-weight", help="Loss weight of steps labelled from video by the inverse-dynamics model (demos --from-video)."),
    idm_min_confidence: float = option(
        Number(0.0, 1.0), 0.0, "--idm-min-confidence", help="Drop IDM-labelled steps whose label's probability is below this (their frames stay as context).",
    ),
    resume: bool = typer.Option(
        False, "--resume",
        help="Go on from an interrupted training of --out (its state after every epoch is kept beside it, in .OUT.training/, "
             "until OUT is written), with the same options; --epochs may be raised.",
    ),
    threads: int = threads_option(),
) -> None:
    """Train an imitation policy (memory-augmented GRU + DINO teacher) on demo episodes.

    The checkpoint holds the encoder, the policy, its key map, and how to score executed tests
    (the expert's action distribution and the success threshold from validation demos).

    DAgger rounds: `playtester demos --dagger policy.ckpt --out demos/path-dagger1 …` lets the
    policy drive while the expert labels; train again with `--demos demos/path --demos
    demos/path-dagger1` (and `--init policy.ckpt` to go on from its weights).

    Footage labelled by `playtester demos --from-video` trains beside the demos (never in
    validation or the held-out score), weighed by --idm-weight and filtered by --idm-min-confidence.
    """
    give_cores(threads)
    from playtester.imitation.fit import fit_policy
    from playtester.imitation.training import TrainConfig

    _check_training_memory(encoder, global_hidden, local_hidden, batch_size, chunk, teacher=not no_teacher)
    _check_demos_and_init(demos, init, behavior)
    tcfg = TrainConfig(epochs=epochs, batch_size=batch_size, chunk=chunk, lr_peak=lr, lr_start=lr / 10,
                       teacher=not no_teacher, seed=seed, idm_weight=idm_weight, idm_min_confidence=idm_min_confidence)
    result = fit_policy(demos, encoder, out, tcfg, behavior=behavior, max_minutes=max_minutes, logdir=logdir,
                        shape={"global_hidden": global_hidden, "local_hidden": local_hidden},
                        say=lambda msg: console.print(msg), init=init, resume=resume)
    _print_trained_policy(result, out)


def _check_training_memory(encoder: Path, global_hidden: int, local_hidden: int, batch_size: int, chunk: int, teacher: bool) -> None:
    """Refuse, before any data is read, a policy shape and batch that would not fit in memory,
    naming the options that set them."""
    from playtester.imitation.policy import PolicyConfig, training_memory

    features = _encoder_features(encoder)
    check_memory(training_memory(PolicyConfig(feature_dim=features, global_hidden=global_hidden, local_hidden=local_hidden),
                                 batch_size, chunk, teacher=teacher),
                 f"--global-hidden {global_hidden} with --local-hidden {local_hidden}, --batch-size {batch_size}, "
                 f"--chunk {chunk} and {features} encoder features")


def _print_trained_policy(result, out: Path) -> None:
    """The trained policy's held-out accuracy per action, its best validation loss and the
    success threshold its tests will be scored by."""
    tag, keymap, held_out, scoring = result.behavior, result.keymap, result.held_out, result.scoring
    table = Table(title=f"policy {tag}: held-out accuracy per action ({result.held_out_split} episodes)")
    table.add_column("action")
    table.add_column("steps", justify="right")
    table.add_column("accuracy", justify="right")
    for name, n, acc in zip(keymap.names, held_out["support"], held_out["per_action"]):
        table.add_row(name, f"{int(n)}", f"{acc:.0%}" if n else "–")
    console.print(table)
    console.print(
        f"held-out accuracy {held_out['accuracy']:.1%}; best val loss {result.best_val:.3f}; "
        f"success threshold JSD ≤ {scoring['threshold']:.3f}\nwrote {out}"
    )


def _encoder_features(encoder: Path) -> int:
    """The width of the encoder's features, from its checkpoint (refused in one line naming
    --encoder when it is not an encoder's)."""
    from playtester.perception.training import read_checkpoint

    with about("--encoder"):
        config, _ = read_checkpoint(encoder, "encoder")
    features = config.get("feature_dim", 512)
    return features if isinstance(features, int) and features > 0 else 512  # a bad one is refused by the encoder's loader


def _check_demos_and_init(demos: list[Path], init: Optional[Path], behavior: Optional[str]) -> None:
    """Read the demos and --init before anything is built, so bad input names its option."""
    from playtester.imitation.data import load_demo_folders
    from playtester.perception.training import read_checkpoint

    with about("--demos"):
        load_demo_folders(demos, behavior)
    if init is not None:
        with about("--init"):
            read_checkpoint(init, "policy")


def eval_policy(
    ckpt: Path = option(InFile("policy checkpoint"), ..., "--ckpt", help="Policy checkpoint."),
    game: str = option(Text(), "doom:park", "--game", help="Game to play it in (needs telemetry for the measures)."),
    behavior: Optional[str] = option(Choice("inspect", "path"), None, "--behavior", help="inspect or path (default: the checkpoint's)."),
    episodes: int = option(Count(1, MANY), 10, "--episodes", help="How many executed tests."),
    steps: Optional[int] = option(Count(1, MANY), None, "--steps", help="Steps per test (default: 1.5 × the longest demo)."),
    seed: int = option(Seed(), 1000, "--seed", help="Seed of the held-out starts and of action sampling."),
    greedy: bool = typer.Option(False, "--greedy", help="Take the most likely action instead of sampling."),
    out: Optional[Path] = option(OutFile(".json"), None, "--out", help="Also write the per-test results as JSON here."),
) -> None:
    """Play a policy in the game from held-out starts and score each executed test.

    Reports each test's Jensen–Shannon divergence from the expert's action distribution, the
    success threshold from validation demos and the success rate; with telemetry, the
    behaviour's own measure: degrees circled around the OOI (and the share of steps it was on
    screen) for inspect, the share of steps on pathways and the map cells walked for path.
    """
    from playtester.imitation.evaluate import evaluate_policy
    from playtester.imitation.live import load_policy

    with about("--ckpt"):
        live = load_policy(ckpt)
    behavior = behavior or live.cfg.behavior
    if behavior not in ("inspect", "path"):
        raise UserError(f"--behavior {behavior!r}: use inspect or path")
    inputs_checked()
    results = evaluate_policy(live, game, behavior, episodes=episodes, steps=steps, seed=seed, greedy=greedy, ckpt=str(ckpt))
    table = Table(title=f"{behavior} policy on {game}: {episodes} held-out tests")
    table.add_column("test", justify="right")
    table.add_column("JSD", justify="right")
    table.add_column("success")
    measure = "degrees (on screen)" if behavior == "inspect" else "on pathways (cells walked)"
    table.add_column(measure, justify="right")
    for i, r in enumerate(results["tests"]):
        m = f"{r['degrees']:.0f}° ({r['on_screen']:.0%})" if behavior == "inspect" else f"{r['on_path']:.0%} ({r['cells']})"
        table.add_row(str(i), f"{r['jsd']:.3f}", "yes" if r["success"] else "no", m)
    console.print(table)
    s = results["summary"]
    line = f"success rate {s['success_rate']:.0%} (JSD ≤ {s['threshold']:.3f}); "
    if behavior == "inspect":
        line += f"circled ≥270° in {s['circled_270']:.0%} of tests, median {s['median_degrees']:.0f}°"
    else:
        line += f"{s['on_path']:.0%} of steps on pathways, {s['cells']:.0f} cells walked on average"
    console.print(line)
    if not s["held_out"]:
        what = "OOI was an inspect target" if behavior == "inspect" else "on-path start point was a start"
        console.print(f"note: every {what} of the training demos on {game}; these tests reuse them from new random "
                      "positions, so they are not held out (train on fewer demos or evaluate on another park seed)")
    if out is not None:
        from playtester.files import write_text_atomic

        write_text_atomic(out, json.dumps(results, indent=1))
        console.print(f"wrote {out}")
