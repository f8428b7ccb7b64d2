"""`BackgroundJob` (exploration/background.py), and the two jobs the explorer runs with it: PPO's
update beside the next rollout and RND's training beside it."""

import threading

import numpy as np
import pytest
import torch
from lightning.fabric import Fabric

from playtester.exploration.background import BackgroundJob
from playtester.exploration.hook import StepView
from test_exploration_ppo import Squares, tiny_explorer


def test_a_job_hands_its_result_or_its_error_to_whoever_waits():
    """The work runs in a thread named for the job, on the torch threads of the thread that started
    it; `wait` gives its result (None when nothing runs); an error in it is raised at the wait; a
    second start before the wait is refused."""
    job = BackgroundJob("a-job")
    assert job.wait() is None and not job.running
    release, seen = threading.Event(), []

    def work(x):
        release.wait(10)
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return x * 2

    threads = torch.get_num_threads()
    job.start(work, 21)
    assert job.running
    with pytest.raises(RuntimeError, match="a-job: the last job is not waited for"):
        job.start(work, 1)
    release.set()
    assert job.wait() == 42 and seen == [("a-job", threads)] and not job.running

    def broken():
        raise ValueError("it broke")

    job.start(broken)
    with pytest.raises(ValueError, match="it broke"):
        job.wait()
    assert job.wait() is None  # the error was handed over once


def test_a_job_keeps_the_threads_it_started_with_when_its_starter_changes_its_own():
    """The games' side drops to one torch thread while a rollout plays; a job started before that
    (PPO's update) keeps its starter's count, though torch hands a new thread the count set last."""
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        job, go = BackgroundJob("update"), threading.Event()
        job.start(lambda: go.wait(10) and torch.get_num_threads())
        torch.set_num_threads(1)
        go.set()
        assert job.wait() == 2
    finally:
        torch.set_num_threads(threads)


def test_rnd_training_beside_the_next_rollout_is_the_same_training(tmp_path, monkeypatch):
    """`end_rollout` returns with the predictors' training under way in its job; what is saved
    next (or the next rollout's rewards) waits for it, and it is the training done in place with
    the seed it drew; a training that fails says so at the next wait."""
    import copy

    import playtester.exploration.reward as reward_module
    from playtester.exploration.rnd import train_predictors

    frames = np.stack([Squares().reset(seed=s)[0] for s in range(2 * 9)]).reshape(9, 2, 64, 64, 3)
    hooks = []
    for _ in range(2):  # the same reward twice (tiny_explorer seeds its weights)
        _, h = tiny_explorer(tmp_path)
        h.setup(Fabric(accelerator="cpu", devices=1))
        h.rnd.observe(h.rnd_frames(frames[:4].reshape(8, 64, 64, 3)))  # warmed up (8 frames)
        for t in range(8):
            h.step(StepView(frames[t], torch.zeros(2, 3), torch.tensor([t == 0, False]), frames[t + 1]))
        hooks.append(h)
    hook, twin = hooks

    torch.manual_seed(7)
    shaped = hook.end_rollout()
    assert hook.training.running and np.isnan(shaped.logs["losses/rnd_loss"])  # nothing finished before it
    saved = hook.state_dict()["rnd"]  # waits for the training
    assert not hook.training.running and np.isfinite(hook._last_loss)

    torch.manual_seed(7)  # by hand: the rewards (which fold the rollout's frames in), the seed, the training
    twin._rollout_rewards(twin._recorded, None)
    seed = int(torch.randint(0, 2**62, (1,)))
    before = copy.deepcopy(twin.rnd.state_dict())
    train_predictors(twin.rnd, twin.rnd_optimizer, twin.fabric, generator=torch.Generator().manual_seed(seed))
    expected = twin.rnd.state_dict()
    changed = [k for k in expected if not torch.equal(expected[k], before[k])]
    assert any(k.startswith("predictors.") for k in changed)
    for key, value in expected.items():  # (the reward's running statistics are end_rollout's, not the training's)
        if not key.startswith(("reward_rms", "reward_filter")):
            torch.testing.assert_close(saved[key], value, rtol=0, atol=1e-6, msg=key)

    def broken(*args, **kwargs):
        raise RuntimeError("predictors broke")

    monkeypatch.setattr(reward_module, "train_predictors", broken)
    for t in range(8):
        hook.step(StepView(frames[t], torch.zeros(2, 3), torch.tensor([False, False]), frames[t + 1]))
    hook.end_rollout()
    with pytest.raises(RuntimeError, match="predictors broke"):
        hook.wait_for_training()


def test_the_rollouts_rewards_are_computed_in_the_updates_thread(tmp_path, monkeypatch):
    """The games do not wait for a rollout's rewards: at its end the hook's record is handed off (in
    the thread that plays: the next rollout's steps go to new lists) and its RND and preference
    passes run in the update's job, one rollout of 8 steps each time."""
    from playtester.exploration.ppo import train
    from playtester.exploration.reward import ExplorationReward

    cfg, hook = tiny_explorer(tmp_path)
    hand_offs, rewards = [], []
    real_hand_off, real_rewards = ExplorationReward.hand_off, ExplorationReward._rewards

    def hand_off(self):
        hand_offs.append((threading.current_thread().name, len(self._recorded.reached)))
        work = real_hand_off(self)
        assert len(self._recorded.reached) == 0
        return work

    monkeypatch.setattr(ExplorationReward, "hand_off", hand_off)
    monkeypatch.setattr(ExplorationReward, "_rewards", lambda self, recorded, reached, seed: rewards.append(
        (threading.current_thread().name, len(recorded.reached))) or real_rewards(self, recorded, reached, seed))
    assert cfg.overlap_update
    train(cfg, reward_hook=hook, env_fn=Squares)
    assert hand_offs == [("MainThread", 8)] * 2 and rewards == [("ppo-update", 8)] * 2
