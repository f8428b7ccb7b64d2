"""Train a policy from a demos folder and an encoder checkpoint: the whole recipe in one call."""

from __future__ import annotations

import functools
import json
import shutil
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.imitation.data import DemoDataModule, demo_starts_and_targets
from playtester.imitation.jsd import action_distribution, success_threshold
from playtester.imitation.policy import PolicyConfig, encode_frames
from playtester.imitation.training import BehaviourCloning, TrainConfig, evaluate_offline
from playtester.perception.encoder import load_encoder
from playtester.files import inputs_checked, write_text_atomic
from playtester.perception.training import keep_last, load_torch_file, make_trainer, read_checkpoint, save_checkpoint_atomic


@dataclass
class FitResult:
    module: BehaviourCloning
    behavior: str
    keymap: KeyMap
    scoring: dict[str, Any]
    held_out: dict[str, Any]
    held_out_split: str
    best_val: float


def warm_start(module: BehaviourCloning, init: str | Path) -> None:
    """Start from the weights of a policy checkpoint of the same shape (a DAgger round goes on
    from the last round's policy instead of from scratch)."""
    hp, state = read_checkpoint(init, "policy")
    theirs = PolicyConfig(**hp["policy"])
    ours = module.cfg
    for name in ("n_actions", "feature_dim", "k", "local_hidden", "global_hidden", "mlp"):
        if getattr(theirs, name) != getattr(ours, name):
            raise UserError(f"--init {init}: its {name} is {getattr(theirs, name)}, this policy's is {getattr(ours, name)}; "
                            "train with the same shape or leave --init out")
    encoder = module.model.encoder.state_dict()
    same = all(torch.equal(v, state.get("encoder." + k, torch.empty(0))) for k, v in encoder.items())
    if not same:
        raise UserError(f"--init {init}: it was trained on another encoder's features; pass the same --encoder or leave --init out")
    module.model.core.load_state_dict({k.removeprefix("core."): v for k, v in state.items() if k.startswith("core.")})


def fit_policy(
    demos: str | Path | Sequence[str | Path], encoder: str | Path, out: str | Path, tcfg: TrainConfig, *,
    behavior: str | None = None, max_minutes: float | None = None, logdir: str | Path | None = None,
    shape: dict[str, Any] | None = None, progress: bool = True, say: Callable[[str], None] = print,
    init: str | Path | None = None, resume: bool = False,
) -> FitResult:
    """Split the demos 70/10/20 by episode, encode them with the frozen encoder, train with early
    stopping, keep the best validation epoch's weights, write the checkpoint atomically, score
    held-out episodes.

    Only expert-driven episodes are split; DAgger episodes (the policy drove, the expert labelled)
    all train, so that validation, the held-out score and the scoring data stay the expert's own.

    The checkpoint carries the scoring data: the expert's action distribution (training demos),
    the success threshold (validation demos), the demos' lengths, starts and targets (so that
    evaluation can pick held-out ones). `init` starts from another policy checkpoint's weights.

    The training's state is kept beside `out` (`training_folder`) after every epoch, and removed
    once `out` is written; `resume` goes on from there, with the same demos, encoder and settings."""
    out = Path(out)
    folder = training_folder(out)
    settings = _training_settings(demos, encoder, behavior, shape, init, tcfg)
    if resume:
        check_resumable(out, folder, settings)
    L.seed_everything(tcfg.seed, verbose=False)
    enc = load_encoder(encoder)
    shape = {k: v for k, v in (shape or {}).items() if v is not None}
    # the demos must have the encoder's actions (DemoDataModule checks), so the policy's shape is known before them
    cfg = PolicyConfig(n_actions=len(enc.config.action_names), feature_dim=int(enc.out_dim), encoder=asdict(enc.config), **shape)
    encode = functools.partial(encode_frames, enc, cfg.frames, cfg.feature_dim)  # at the policy's input size
    dm = DemoDataModule(demos, encode, action_names=enc.config.action_names, k=cfg.k, behavior=behavior,
                        batch_size=tcfg.batch_size, seed=tcfg.seed, teacher=tcfg.teacher, idm=tcfg.idm_use, say=say)
    dm.setup("fit")
    tag = behavior or dm.episodes[0].behavior
    cfg = replace(cfg, behavior=tag, keymap=dm.keymap.to_dict())
    scoring = scoring_data(dm)
    module = BehaviourCloning(cfg.to_dict(), asdict(tcfg), scoring, encoder=enc)
    if init is not None and not resume:
        warm_start(module, init)
        say(f"starting from the weights of {init}")
    inputs_checked()  # the demos, the encoder and --init are read: from here on the training's state is kept
    _open_training_state(folder, settings, resume, say)
    best, trainer = _train(module, dm, tcfg, folder, logdir or out.parent / "logs", max_minutes, progress, resume)
    if best.best_model_path:  # else no validation ran (the time limit came first): the last weights
        module.model.load_state_dict(read_checkpoint(best.best_model_path, "policy")[1])
    save_checkpoint_atomic(trainer, out)
    shutil.rmtree(folder, ignore_errors=True)
    test = dm.trajs["test"] or dm.trajs["val"]
    held_out = evaluate_offline(module.model, test)
    best_val = float(best.best_model_score) if best.best_model_score is not None else float("inf")
    return FitResult(module, tag, dm.keymap, scoring, held_out, "test" if dm.trajs["test"] else "validation", best_val)


def _training_settings(
    demos: str | Path | Sequence[str | Path], encoder: str | Path, behavior: str | None, shape: dict[str, Any] | None,
    init: str | Path | None, tcfg: TrainConfig,
) -> dict[str, Any]:
    """What a training is run with, as JSON would read it back: `--resume` refuses to go on with
    other demos, encoder or settings (the epochs alone may change)."""
    return json.loads(json.dumps({
        "demos": sorted(str(Path(d).resolve()) for d in ([demos] if isinstance(demos, (str, Path)) else demos)),
        "encoder": str(Path(encoder).resolve()), "behavior": behavior, "shape": shape, "init": init and str(Path(init).resolve()),
        "train": {k: v for k, v in asdict(tcfg).items() if k != "epochs"},  # more epochs may be asked on resuming
    }))


def _open_training_state(folder: Path, settings: dict[str, Any], resume: bool, say: Callable[[str], None]) -> None:
    """A fresh state folder holding the training's settings, or (resuming) say how many epochs the
    interrupted training had finished."""
    if not resume:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        write_text_atomic(folder / "settings.json", json.dumps(settings, indent=1))
    if resume:
        last = folder / "last.ckpt"
        finished = int(load_torch_file(last, "the interrupted training's state")["epoch"]) + 1
        say(f"going on after the {finished} finished epochs of the interrupted training ({last})")


def _train(
    module: BehaviourCloning, dm: DemoDataModule, tcfg: TrainConfig, folder: Path, logdir: str | Path,
    max_minutes: float | None, progress: bool, resume: bool,
) -> tuple[ModelCheckpoint, L.Trainer]:
    """Fit with early stopping on the validation loss, the best epoch's weights and the last
    epoch's state kept in `folder` (the last is where `resume` goes on from)."""
    last = folder / "last.ckpt"
    best = ModelCheckpoint(folder, filename="best", monitor="val/loss", mode="min", save_weights_only=True,
                           enable_version_counter=False)
    trainer = make_trainer(
        name="policy", logdir=logdir, epochs=tcfg.epochs, max_minutes=max_minutes, progress=progress,
        callbacks=[EarlyStopping("val/loss", patience=tcfg.patience), best, keep_last(last)],
    )
    with warnings.catch_warnings():  # the frozen encoder and the EMA teacher are in eval mode on purpose
        warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode.*")
        warnings.filterwarnings("ignore", message=r".*exists and is not empty.*")  # the state folder: its own files
        trainer.fit(module, datamodule=dm, ckpt_path=last if resume else None)
    return best, trainer


def training_folder(out: str | Path) -> Path:
    """Where the training of the policy `out` keeps its state until `out` is written."""
    out = Path(out)
    return out.parent / f".{out.name}.training"


OPTIONS = {"lr_peak": "--lr", "lr_start": "--lr", "batch_size": "--batch-size", "chunk": "--chunk", "teacher": "--no-teacher",
           "seed": "--seed", "idm_weight": "--idm-weight", "idm_min_confidence": "--idm-min-confidence"}
"""`train policy`'s option for each training setting it sets."""


def check_resumable(out: Path, folder: Path, settings: dict[str, Any]) -> None:
    """A UserError unless `folder` holds an interrupted training of `out` with these settings."""
    if not (folder / "last.ckpt").is_file():
        raise UserError(f"--resume: no interrupted training of {out} to go on from ({folder / 'last.ckpt'} is missing: "
                        "none was started, or it finished); train without --resume")
    before = json.loads((folder / "settings.json").read_text()) if (folder / "settings.json").is_file() else {}
    for key in settings:
        theirs, ours = before.get(key), settings[key]
        if key == "train" and isinstance(theirs, dict):
            changed = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
            if changed:
                names = sorted({OPTIONS.get(k, k) for k in changed})
                raise UserError(f"--resume: {', '.join(names)} differ{'s' if len(names) == 1 else ''} from the interrupted training's "
                                f"({', '.join(f'{k} {theirs.get(k)} there' for k in changed)}); give the same options or train without --resume")
        elif theirs != ours:
            raise UserError(f"--resume: the {key} differ from the interrupted training's ({theirs} there, {ours} now); "
                            "give the same options or train without --resume")


def scoring_data(dm: DemoDataModule) -> dict[str, Any]:
    """What evaluation scores a policy by, from its demos: the expert's action distribution
    (expert-driven training demos), the success threshold (validation demos), the expert demos'
    lengths, and the games, starts and targets the demos used."""
    n = dm.keymap.n
    expert_train = [t for t, e in zip(dm.trajs["train"], dm.parts["train"]) if e.expert_driven]
    expert = action_distribution(torch.cat([t.actions for t in expert_train]).numpy(), n)
    expert_eps = dm.expert_episodes
    return {
        "expert_distribution": expert.tolist(),
        "threshold": success_threshold(expert, [v.actions.numpy() for v in dm.trajs["val"]], n),
        "mean_length": float(sum(len(e) for e in expert_eps) / len(expert_eps)),
        "max_length": int(max(len(e) for e in expert_eps)),
        "demo_games": sorted({e.meta.get("game", "") for e in dm.episodes}),
        "demo_by_game": demo_starts_and_targets(dm.episodes),  # read through `trained_on`
    }
