"""Behaviour cloning with the DINO-style teacher, as one LightningModule.

Whole trajectories are trained by truncated back-propagation: each batch holds B episodes, cut
into chunks of `chunk` steps; the global GRU's state is carried from chunk to chunk (detached),
and the optimiser steps once per chunk (manual optimisation). Loss = cross-entropy to the expert
action + λ · DINO consistency between teacher and student `h^c`. AdamW with a linear warm-up then
cosine decay (torch schedulers, stepped once a batch), early stopping on the validation loss, the
best validation epoch's weights kept (Lightning's EarlyStopping and ModelCheckpoint, see `fit`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR

from playtester.errors import UserError
from playtester.imitation.data import Batch, IdmUse, Trajectory
from playtester.imitation.policy import ImitationPolicy, PolicyConfig, build_encoder
from playtester.imitation.teacher import EMATeacher, dino_loss
from playtester.perception.training import tag_checkpoint

CHECKPOINT_KIND = "policy"


@dataclass
class TrainConfig:
    """How the policy is trained. Learning rates differ from the paper's 2e-3 → 1e-2 warm-up,
    which made the GRUs diverge here; the schedule's shape is the paper's."""

    epochs: int = 40
    """Most epochs (the paper's 40); early stopping may end sooner."""
    batch_size: int = 8
    """Episodes per batch."""
    chunk: int = 32
    """Steps per truncated back-propagation chunk."""
    lr_start: float = 1e-4
    """Learning rate at the start of the warm-up."""
    lr_peak: float = 1e-3
    """Learning rate at the end of the warm-up."""
    lr_end: float = 1e-5
    """Learning rate the cosine decay ends at."""
    warmup_epochs: int = 10
    """Epochs of linear warm-up (the paper's 10), shortened to a quarter of `epochs` when fewer."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Gradient norm clip."""
    teacher: bool = True
    """Use the DINO-style teacher (False: the ablation, plain behaviour cloning)."""
    dino_weight: float = 0.1
    """λ, the weight of the consistency loss."""
    tau_student: float = 0.1
    """Student softmax temperature."""
    tau_teacher: float = 0.04
    """Teacher softmax temperature (sharper)."""
    ema: float = 0.996
    """Teacher EMA momentum."""
    patience: int = 8
    """Early stopping: epochs without a better validation loss."""
    seed: int = 0
    idm_weight: float = 1.0
    """Loss weight of steps labelled by the inverse-dynamics model (`demos --from-video`)."""
    idm_min_confidence: float = 0.0
    """IDM-labelled steps below this label probability weigh 0 (their frames still run through
    the policy's memory)."""

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.chunk < 1:
            raise UserError("policy training: epochs, batch size and chunk must each be at least 1")
        if not (0 < self.lr_start and 0 < self.lr_peak and 0 < self.lr_end):
            raise UserError("policy training: learning rates must be positive")
        if not 0.0 <= self.ema < 1.0:
            raise UserError(f"policy training: ema {self.ema} must be in [0, 1)")
        IdmUse(weight=self.idm_weight, min_confidence=self.idm_min_confidence)  # one-line errors for the two options

    @property
    def idm_use(self) -> IdmUse:
        return IdmUse(weight=self.idm_weight, min_confidence=self.idm_min_confidence)

    @property
    def warmup(self) -> int:
        """Epochs of warm-up: `warmup_epochs`, or a quarter of `epochs` when that is fewer (at least 1)."""
        return min(self.warmup_epochs, max(1, self.epochs // 4))


def warmup_cosine(opt: torch.optim.Optimizer, cfg: TrainConfig, steps_per_epoch: int) -> SequentialLR:
    """The learning rate, stepped once a batch: linear from `lr_start` to `lr_peak` (the
    optimiser's own rate) over the warm-up epochs, then cosine down to `lr_end` at the last epoch."""
    warm = cfg.warmup * steps_per_epoch
    rise = LinearLR(opt, start_factor=cfg.lr_start / cfg.lr_peak, end_factor=1.0, total_iters=warm)
    fall = CosineAnnealingLR(opt, T_max=max(1, cfg.epochs * steps_per_epoch - warm), eta_min=cfg.lr_end)
    return SequentialLR(opt, [rise, fall], milestones=[warm])


class BehaviourCloning(L.LightningModule):
    """Trains an `ImitationPolicy` (the `model`) from demo trajectories as features."""

    def __init__(self, policy: dict[str, Any], train: dict[str, Any], scoring: dict[str, Any] | None = None, encoder: torch.nn.Module | None = None) -> None:
        super().__init__()
        self.save_hyperparameters({"policy": policy, "train": train, "scoring": scoring or {}})
        self.cfg = PolicyConfig(**policy)
        self.tcfg = TrainConfig(**train)
        if encoder is None:
            encoder = build_encoder(self.cfg.encoder)
        self.model = ImitationPolicy(self.cfg, encoder)
        for p in self.model.encoder.parameters():  # frozen: features are precomputed
            p.requires_grad_(False)
        self.teacher = EMATeacher(self.model.core, momentum=self.tcfg.ema, width=self.cfg.state_dim) if self.tcfg.teacher else None
        self.automatic_optimization = False

    # -- training --------------------------------------------------------------------------------
    def training_step(self, batch: Batch, batch_idx: int) -> None:
        opt = self.optimizers()
        core = self.model.core
        windows = core.windows(batch.student)
        t_windows = core.windows(batch.teacher) if self.teacher is not None else None
        h = ht = None
        n_chunks = math.ceil(batch.actions.shape[1] / self.tcfg.chunk)
        for c in range(n_chunks):
            sl = slice(c * self.tcfg.chunk, (c + 1) * self.tcfg.chunk)
            mask = batch.mask[:, sl].bool()
            if not mask.any():
                break
            logits, hc, h = core.forward_windows(windows[:, sl], h)
            ce = weighted_cross_entropy(logits[mask], batch.actions[:, sl][mask], batch.weights[:, sl][mask])
            loss = ce
            if self.teacher is not None:
                with torch.no_grad():
                    _, hct, ht = self.teacher.model.forward_windows(t_windows[:, sl], ht)
                dl = dino_loss(hc[mask], hct[mask], self.teacher.center, self.tcfg.tau_student, self.tcfg.tau_teacher)
                loss = ce + self.tcfg.dino_weight * dl
                self.teacher.update_center(hct[mask])
                self.log("train/dino", dl, on_step=True, on_epoch=True, batch_size=int(mask.sum()))
            opt.zero_grad()
            self.manual_backward(loss)
            self.clip_gradients(opt, gradient_clip_val=self.tcfg.grad_clip, gradient_clip_algorithm="norm")
            opt.step()
            if self.teacher is not None:
                self.teacher.update(core)
            h = h.detach()
            acc = (logits[mask].argmax(-1) == batch.actions[:, sl][mask]).float().mean()
            self.log_dict({"train/ce": ce, "train/acc": acc, "train/loss": loss, "train/lr": opt.param_groups[0]["lr"]},
                          on_step=True, on_epoch=True, prog_bar=True, batch_size=int(mask.sum()))
        self.lr_schedulers().step()

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        logits, _, _ = self.model.core(batch.student)
        mask = batch.mask.bool()
        ce = F.cross_entropy(logits[mask], batch.actions[mask])
        acc = (logits[mask].argmax(-1) == batch.actions[mask]).float().mean()
        self.log_dict({"val/loss": ce, "val/acc": acc}, prog_bar=True, batch_size=int(mask.sum()))

    def configure_optimizers(self):
        params = [p for p in self.model.core.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=self.tcfg.lr_peak, weight_decay=self.tcfg.weight_decay)
        steps_per_epoch = max(1, round(self.trainer.estimated_stepping_batches / self.trainer.max_epochs))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": warmup_cosine(opt, self.tcfg, steps_per_epoch), "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        tag_checkpoint(checkpoint, CHECKPOINT_KIND)
        # the teacher only matters while training: a policy checkpoint holds the student, and only
        # the whole training state (with the optimiser's, for `train policy --resume`) the teacher too
        if "optimizer_states" not in checkpoint:
            checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if not k.startswith("teacher.")}


def weighted_cross_entropy(logits: torch.Tensor, actions: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged with per-step weights (the plain mean when all are 1; 0, with no
    gradient from it, when all are 0)."""
    per_step = F.cross_entropy(logits, actions, reduction="none")
    return (per_step * weights).sum() / weights.sum().clamp(min=1e-8)


def evaluate_offline(policy: ImitationPolicy, trajs: list[Trajectory]) -> dict[str, float]:
    """Held-out accuracy and per-action accuracy of the student on expert trajectories."""
    policy.eval()
    correct = total = 0
    n = policy.cfg.n_actions
    per_hit = torch.zeros(n)
    per_all = torch.zeros(n)
    with torch.no_grad():
        for tr in trajs:
            logits, _, _ = policy.core(tr.student[None])
            pred = logits[0].argmax(-1)
            correct += int((pred == tr.actions).sum())
            total += len(tr)
            per_all += torch.bincount(tr.actions, minlength=n).float()
            per_hit += torch.bincount(tr.actions[pred == tr.actions], minlength=n).float()
    return {"accuracy": correct / max(1, total), "per_action": (per_hit / per_all.clamp(min=1)).tolist(), "support": per_all.tolist()}
