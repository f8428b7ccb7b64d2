"""Train a policy from a demos folder and an encoder checkpoint: the whole recipe in one call."""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import lightning as L
import torch

from playtester.capture.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.datasets.episodes import Episode, load_episodes
from playtester.imitation.data import check_demos, demo_starts_and_targets, encode_episodes, split_demos
from playtester.imitation.jsd import action_distribution, success_threshold
from playtester.imitation.policy import ImitationPolicy, PolicyConfig
from playtester.imitation.training import BehaviourCloning, KeepBest, TrainConfig, evaluate_offline, loader
from playtester.perception.encoder import load_encoder
from playtester.perception.training import make_trainer, save_checkpoint_atomic


@dataclass
class FitResult:
    module: BehaviourCloning
    behavior: str
    keymap: KeyMap
    scoring: dict[str, Any]
    held_out: dict[str, Any]
    held_out_split: str
    best_val: float


def load_demo_folders(demos: str | Path | Sequence[str | Path], behavior: str | None) -> tuple[list[Episode], str]:
    """Every episode under one or more demo folders (an episode under two of them counts once),
    and the folders as one name for messages."""
    roots = [demos] if isinstance(demos, (str, Path)) else list(demos)
    if not roots:
        raise UserError("train policy: give at least one --demos folder")
    seen: dict[Path, Episode] = {}
    for root in roots:
        for ep in load_episodes(root, behavior=behavior):
            seen.setdefault(ep.path.resolve(), ep)
    return list(seen.values()), ", ".join(str(r) for r in roots)


def warm_start(module: BehaviourCloning, init: str | Path) -> None:
    """Start from the weights of a policy checkpoint of the same shape (a DAgger round goes on
    from the last round's policy instead of from scratch)."""
    from playtester.perception.training import read_checkpoint

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
    init: str | Path | None = None,
) -> FitResult:
    """Split the demos 70/10/20 by episode, encode them with the frozen encoder, train with early
    stopping, keep the best weights, write the checkpoint atomically, score held-out episodes.

    Only expert-driven episodes are split; DAgger episodes (the policy drove, the expert labelled)
    all train, so that validation, the held-out score and the scoring data stay the expert's own.

    The checkpoint carries the scoring data: the expert's action distribution (training demos),
    the success threshold (validation demos), the demos' lengths, starts and targets (so that
    evaluation can pick held-out ones). `init` starts from another policy checkpoint's weights."""
    out = Path(out)
    L.seed_everything(tcfg.seed, verbose=False)
    enc = load_encoder(encoder)
    episodes, demos = load_demo_folders(demos, behavior)
    shape = {k: v for k, v in (shape or {}).items() if v is not None}
    k = PolicyConfig(**shape).k
    keymap = check_demos(episodes, enc.config.action_names, k, demos)
    expert_eps = [e for e in episodes if e.expert_driven]
    train_eps, val_eps, test_eps = split_demos(episodes, tcfg.seed)
    if not val_eps:
        raise UserError(f"demos folder {demos}: {len(expert_eps)} expert-driven episodes; record at least 3 (train, validation, test)")
    tag = behavior or episodes[0].behavior
    cfg = PolicyConfig(n_actions=keymap.n, feature_dim=int(enc.out_dim), image_size=enc.config.image_size,
                       behavior=tag, keymap=keymap.to_dict(), encoder=asdict(enc.config), **shape)
    shell = ImitationPolicy(cfg, enc)
    n_dagger = len(episodes) - len(expert_eps)
    say(f"encoding {len(episodes)} episodes ({sum(len(e) for e in episodes)} frames) with the frozen encoder"
        + (f"; {n_dagger} DAgger or video episodes train only" if n_dagger else ""))
    train, val, test = (encode_episodes(eps, shell.encode, teacher=tcfg.teacher, idm=tcfg.idm_use) for eps in (train_eps, val_eps, test_eps))
    expert_train = [t for t, e in zip(train, train_eps) if e.expert_driven]
    expert = action_distribution(torch.cat([t.actions for t in expert_train]).numpy(), keymap.n)
    scoring = {
        "expert_distribution": expert.tolist(),
        "threshold": success_threshold(expert, [v.actions.numpy() for v in val], keymap.n),
        "mean_length": float(sum(len(e) for e in expert_eps) / len(expert_eps)),
        "max_length": int(max(len(e) for e in expert_eps)),
        "demo_games": sorted({e.meta.get("game", "") for e in episodes}),
        "demo_by_game": demo_starts_and_targets(episodes),  # read through `trained_on`
    }
    module = BehaviourCloning(cfg.to_dict(), asdict(tcfg), scoring, encoder=enc)
    if init is not None:
        warm_start(module, init)
        say(f"starting from the weights of {init}")
    keep = KeepBest()
    trainer = make_trainer(
        name="policy", logdir=logdir or out.parent / "logs", epochs=tcfg.epochs, max_minutes=max_minutes, progress=progress,
        callbacks=[L.pytorch.callbacks.EarlyStopping("val/loss", patience=tcfg.patience), keep],
    )
    with warnings.catch_warnings():  # the frozen encoder and the EMA teacher are in eval mode on purpose
        warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode.*")
        trainer.fit(module, loader(train, tcfg.batch_size, True, tcfg.seed), loader(val, tcfg.batch_size, False))
    keep.restore(module)
    save_checkpoint_atomic(trainer, out)
    held_out = evaluate_offline(module.model, test or val)
    return FitResult(module, tag, keymap, scoring, held_out, "test" if test else "validation", keep.best)
