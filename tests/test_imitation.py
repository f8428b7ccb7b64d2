"""The imitation policy's mechanics: over-fitting, the EMA teacher, causality, live = batched."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from playtester.imitation.jsd import action_distribution, jsd, success_threshold
from playtester.imitation.live import LivePolicy
from playtester.imitation.policy import ImitationPolicy, PolicyConfig, PolicyCore
from playtester.imitation.teacher import EMATeacher, dino_loss
from playtester.imitation.training import TrainConfig, warmup_cosine

SMALL = dict(n_actions=5, feature_dim=12, k=4, local_hidden=16, global_hidden=32, mlp=(32, 16), dropout=0.0)


def test_paper_defaults():
    cfg = PolicyConfig()
    assert (cfg.k, cfg.local_hidden, cfg.global_hidden, cfg.mlp, cfg.dropout) == (4, 256, 1024, (512, 256), 0.2)
    assert cfg.state_dim == 2 * 256 + 1024
    core = PolicyCore(cfg)
    assert core.local.bidirectional and core.local.hidden_size == 256 and core.glob.hidden_size == 1024
    norms = [m for m in core.head if isinstance(m, torch.nn.LayerNorm)]
    assert [n.normalized_shape[0] for n in norms] == [512, 256]


def test_overfits_a_tiny_set():
    torch.manual_seed(0)
    core = PolicyCore(PolicyConfig(**SMALL))
    feats = torch.randn(2, 20, 12)
    actions = torch.randint(0, 5, (2, 20))
    opt = torch.optim.AdamW(core.parameters(), lr=3e-3)
    for _ in range(300):
        logits, _, _ = core(feats)
        loss = F.cross_entropy(logits.reshape(-1, 5), actions.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert (core(feats)[0].argmax(-1) == actions).all()


def test_causal_a_later_frame_never_changes_an_earlier_output():
    torch.manual_seed(1)
    core = PolicyCore(PolicyConfig(**SMALL)).eval()
    feats = torch.randn(1, 15, 12)
    base, _, _ = core(feats)
    changed = feats.clone()
    changed[0, 9] += 5.0
    out, _, _ = core(changed)
    assert torch.allclose(out[0, :9], base[0, :9], atol=1e-6)
    assert not torch.allclose(out[0, 9:], base[0, 9:], atol=1e-3)


def test_chunks_with_carried_state_equal_the_whole_sequence():
    torch.manual_seed(2)
    core = PolicyCore(PolicyConfig(**SMALL)).eval()
    feats = torch.randn(3, 17, 12)
    whole, _, _ = core(feats)
    windows = core.windows(feats)
    h, parts = None, []
    for c in range(0, 17, 5):
        out, _, h = core.forward_windows(windows[:, c : c + 5], h)
        parts.append(out)
    assert torch.allclose(torch.cat(parts, 1), whole, atol=1e-5)


def test_done_mask_resets_the_trajectory_memory():
    torch.manual_seed(3)
    core = PolicyCore(PolicyConfig(**SMALL)).eval()
    a, b = torch.randn(1, 6, 12), torch.randn(1, 6, 12)
    joined = torch.cat([a, b], 1)
    done = torch.zeros(1, 12)
    done[0, 6] = 1.0
    out, _, _ = core(joined, done=done)
    alone, _, _ = core(b, history=a[:, -3:])
    assert torch.allclose(out[0, 6:], alone[0], atol=1e-5)


def test_live_stepping_equals_the_batched_forward():
    torch.manual_seed(4)
    cfg = PolicyConfig(**SMALL)
    policy = ImitationPolicy(cfg, torch.nn.Identity())
    live = LivePolicy(policy)
    feats = torch.randn(1, 11, 12)
    batched, _, _ = policy.core.eval()(feats)
    stepped = torch.stack([live.step_features(feats[0, t]) for t in range(11)])
    assert torch.allclose(stepped, batched[0], atol=1e-5)
    live.reset()
    again = live.step_features(feats[0, 0])
    assert torch.allclose(again, batched[0, 0], atol=1e-5)


def test_the_live_encoder_layout_changes_speed_not_features():
    """LivePolicy keeps the AlexNet trunk channels-last (faster on a CPU); its features and
    action distributions are the plain layout's."""
    from playtester.imitation.policy import build_encoder
    from playtester.perception.encoder import EncoderConfig

    enc_cfg = EncoderConfig(action_names=[str(i) for i in range(5)], image_size=64, feature_dim=32, pretrained="none")
    cfg = PolicyConfig(**{**SMALL, "feature_dim": 32, "image_size": 64, "encoder": vars(enc_cfg)})
    lives = []
    for channels_last in (False, True):
        torch.manual_seed(6)
        lives.append(LivePolicy(ImitationPolicy(cfg, build_encoder(cfg.encoder)), channels_last=channels_last))
    assert lives[1].policy.encoder.trunk[0].weight.is_contiguous(memory_format=torch.channels_last)
    frames = np.random.default_rng(0).integers(0, 256, (5, 60, 80, 3), dtype=np.uint8)
    for t, frame in enumerate(frames):
        box = None if t % 2 else [10.0, 10.0, 40.0, 50.0]
        plain, fast = (live.step(frame, box) for live in lives)
        np.testing.assert_allclose(fast, plain, atol=1e-5)


def test_teacher_follows_by_ema_and_gets_no_gradients():
    torch.manual_seed(5)
    student = PolicyCore(PolicyConfig(**SMALL))
    teacher = EMATeacher(student, momentum=0.9, width=student.cfg.state_dim)
    before = [p.clone() for p in teacher.model.parameters()]
    assert all(not p.requires_grad for p in teacher.model.parameters())
    feats = torch.randn(2, 8, 12)
    _, hc, _ = student(feats)
    _, hct, _ = teacher(feats)
    loss = dino_loss(hc.reshape(-1, hc.shape[-1]), hct.reshape(-1, hct.shape[-1]), teacher.center, 0.1, 0.04)
    loss.backward()
    assert all(p.grad is None for p in teacher.model.parameters())
    assert any(p.grad is not None for p in student.parameters())
    with torch.no_grad():
        for p in student.parameters():
            p.add_(1.0)
    teacher.update(student)
    for pt, pb, ps in zip(teacher.model.parameters(), before, student.parameters()):
        assert torch.allclose(pt, 0.9 * pb + 0.1 * ps, atol=1e-6)


def test_dino_loss_hand_worked():
    student = torch.tensor([[0.0, 0.0]])
    teacher = torch.tensor([[1.0, 0.0]])
    center = torch.tensor([0.0, 0.0])
    # teacher with τ = 1: p = softmax(1, 0) = (e/(1+e), 1/(1+e)); student uniform: log p_s = log ½
    p = torch.tensor([np.e / (1 + np.e), 1 / (1 + np.e)])
    expected = -(p * torch.log(torch.tensor([0.5, 0.5]))).sum()
    assert torch.isclose(dino_loss(student, teacher, center, 1.0, 1.0), expected)
    # centering removes a constant shift of the teacher entirely
    assert torch.isclose(dino_loss(student, teacher + 3.0, center + 3.0, 1.0, 1.0), expected)


def test_learning_rate_schedule():
    """Linear warm-up then cosine decay, stepped once a batch (here 2 batches an epoch)."""
    t = TrainConfig(epochs=40, warmup_epochs=10, lr_start=1e-4, lr_peak=1e-3, lr_end=1e-5)
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=t.lr_peak)
    sched = warmup_cosine(opt, t, steps_per_epoch=2)
    seen = []
    for _ in range(81):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen[0] == pytest.approx(1e-4)
    assert seen[10] == pytest.approx(5.5e-4)  # epoch 5: half way up
    assert seen[20] == pytest.approx(1e-3)  # epoch 10: the peak
    assert seen[50] == pytest.approx(1e-5 + 0.5 * (1e-3 - 1e-5))  # epoch 25: half way down
    assert seen[80] == pytest.approx(1e-5)  # epoch 40: the end
    assert TrainConfig(epochs=8, warmup_epochs=10).warmup == 2  # a quarter of a short run


def test_jsd_scoring_hand_worked():
    assert jsd([1, 0], [0, 1]) == pytest.approx(1.0)
    assert jsd([0.5, 0.5], [0.5, 0.5]) == pytest.approx(0.0)
    # m = (¾, ¼): ½·log2(4/3) + ½·(½·log2(2/3) + ½·log2(2)) = 0.311278
    assert jsd([1, 0], [0.5, 0.5]) == pytest.approx(0.311278, abs=1e-6)
    assert action_distribution([0, 0, 1, 3], 4).tolist() == [0.5, 0.25, 0.0, 0.25]
    expert = np.array([0.5, 0.5])
    thr = success_threshold(expert, [[0, 1], [0, 0, 0, 1]], 2, quantile=1.0)
    assert thr == pytest.approx(jsd([0.75, 0.25], expert))
