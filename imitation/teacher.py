"""The DINO-style teacher (PPGTA §IV-B): an EMA copy of the student that sees full RGB frames.

The consistency loss compares the concatenated states `h^c` of teacher and student as
distributions over their dimensions: the teacher's softmax, centred and sharpened by a low
temperature, is the target for the student's log-softmax at a higher temperature. Centering (an
EMA of the teacher's mean output) and sharpening together keep the teacher from collapsing.
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


def dino_loss(student: torch.Tensor, teacher: torch.Tensor, center: torch.Tensor, tau_student: float, tau_teacher: float) -> torch.Tensor:
    """Cross-entropy `−Σ p_t log p_s` per row, averaged; no gradient flows into the teacher."""
    p_teacher = F.softmax((teacher.detach() - center) / tau_teacher, dim=-1)
    log_p_student = F.log_softmax(student / tau_student, dim=-1)
    return -(p_teacher * log_p_student).sum(-1).mean()


class EMATeacher(nn.Module):
    """A frozen copy of a module whose weights follow the student's by exponential moving average."""

    def __init__(self, student: nn.Module, momentum: float = 0.996, center_momentum: float = 0.9, width: int | None = None) -> None:
        super().__init__()
        self.model = copy.deepcopy(student)
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.momentum = momentum
        self.center_momentum = center_momentum
        self.register_buffer("center", torch.zeros(width or 1))

    @torch.no_grad()
    def update(self, student: nn.Module) -> None:
        """`θ_t ← m θ_t + (1 − m) θ_s` for every parameter; buffers are copied."""
        for pt, ps in zip(self.model.parameters(), student.parameters()):
            pt.mul_(self.momentum).add_(ps.detach(), alpha=1.0 - self.momentum)
        for bt, bs in zip(self.model.buffers(), student.buffers()):
            bt.copy_(bs)

    @torch.no_grad()
    def update_center(self, teacher_out: torch.Tensor) -> None:
        mean = teacher_out.reshape(-1, teacher_out.shape[-1]).mean(0)
        if self.center.shape != mean.shape:
            self.center = torch.zeros_like(mean)
        self.center.mul_(self.center_momentum).add_(mean, alpha=1.0 - self.center_momentum)

    def forward(self, *args, **kwargs):
        with torch.no_grad():
            return self.model(*args, **kwargs)
