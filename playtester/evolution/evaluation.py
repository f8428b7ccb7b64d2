"""Playing policies on several game instances at once, to score them (Wuji's evaluations).

`evaluate(agents, jobs, envs, …)` plays every job — one episode of one policy from one reset
seed — on a Gymnasium vector env whose autoreset is off: an instance whose episode ends takes the
next job at once (reset with that job's seed, so any episode can be replayed), until all are
played. The policies sample their actions with a generator seeded by the job, so the same jobs
give the same episodes. Per episode it returns the game's total reward and the set of states
it covered; a watcher (the app's oracles) sees every frame, action and telemetry dict.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from playtester.capture.frames import FrameSpec
from playtester.evolution.state_coverage import StateCoverageConfig, state_key


class EvalJob(NamedTuple):
    """One evaluation episode."""

    policy: int
    """Index of the policy in the list given to `evaluate`."""
    episode: int
    """Which of the policy's episodes this is."""
    seed: int
    """The game's reset seed (what a replay needs)."""
    generation: int = 0


@dataclass
class EpisodeResult:
    job: EvalJob
    reward: float = 0.0
    """The game's total reward (the winning score of this episode)."""
    steps: int = 0
    states: set = field(default_factory=set)
    """States covered (`state_key`), the reset state included."""
    actions: list[int] = field(default_factory=list)


class EpisodeWatcher(Protocol):
    """Sees one episode as it is played (the oracles)."""

    def step(self, action: int, frame: np.ndarray, reward: float, info: dict[str, Any], done: bool) -> None: ...

    def close(self) -> None: ...


WatcherFactory = Callable[[EvalJob, np.ndarray, dict[str, Any]], EpisodeWatcher]
"""Called at each episode's reset with the job, the first frame and its telemetry."""


def unbatch_info(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Instance `i`'s own info dict out of a vector env's batched `infos` (`key`/`_key` masks)."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        out[key] = unbatch_info(value, i) if isinstance(value, dict) else value[i]
    return out


def make_eval_envs(env_fn: Callable[[], gym.Env], num_envs: int, vector_env: str = "sync",
                   on_cluster: bool = False) -> gym.vector.VectorEnv:
    """`num_envs` game instances with autoreset off (the evaluator resets each with its job's seed);
    `on_cluster`: as Ray actors spread over the cluster's nodes (Ray started already)."""
    if on_cluster:
        from playtester.exploration.ray_env import RayVectorEnv

        return RayVectorEnv([env_fn] * num_envs, autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    cls = gym.vector.AsyncVectorEnv if vector_env == "async" else gym.vector.SyncVectorEnv
    return cls([env_fn] * num_envs, autoreset_mode=gym.vector.AutoresetMode.DISABLED)


class _Slot:
    """What one game instance is playing."""

    def __init__(self, job: EvalJob, state: torch.Tensor, watcher: EpisodeWatcher | None):
        self.result = EpisodeResult(job)
        self.state = state
        self.first = True
        self.watcher = watcher
        self.generator = torch.Generator().manual_seed(job.seed)


def _choose_actions(
    agents: Sequence[nn.Module], slots: list[_Slot | None], frames: list[np.ndarray | None], spec: FrameSpec
) -> np.ndarray:
    """One action per instance (0 where it idles). The instances playing the same policy go through
    it in one batch; each samples with its own job's generator, so a job's actions do not depend on
    which instance or which neighbours it had."""
    actions = np.zeros(len(slots), dtype=np.int64)
    by_policy: dict[int, list[int]] = {}
    for i, slot in enumerate(slots):
        if slot is not None:
            by_policy.setdefault(slot.result.job.policy, []).append(i)
    with torch.no_grad():
        for policy, members in by_policy.items():
            agent = agents[policy]
            raw = np.stack([spec.resize(frames[i]) for i in members])
            inputs = agent.prepare(torch.as_tensor(raw)).unsqueeze(0)
            state = torch.cat([slots[i].state for i in members])
            done = torch.tensor([[float(slots[i].first) for i in members]])
            out = agent(inputs, state, done)
            probs = torch.softmax(out.logits[0].float(), dim=-1)
            for k, i in enumerate(members):
                slot = slots[i]
                slot.state, slot.first = out.state[k : k + 1], False
                actions[i] = int(torch.multinomial(probs[k], 1, generator=slot.generator))
    return actions


def _record_step(
    slot: _Slot, action: int, obs: np.ndarray, reward: float, info: dict, ended: bool, coverage: StateCoverageConfig
) -> None:
    """Add one step to the slot's episode result (reward, action, state covered) and show it to
    its watcher, closing the watcher when the episode ended."""
    r = slot.result
    r.reward += reward
    r.steps += 1
    r.actions.append(action)
    r.states.add(state_key(obs, info, coverage))
    if slot.watcher is not None:
        slot.watcher.step(action, obs, reward, info, ended)
        if ended:
            slot.watcher.close()


def evaluate(
    agents: Sequence[nn.Module],
    jobs: Sequence[EvalJob],
    envs: gym.vector.VectorEnv,
    spec: FrameSpec,
    coverage: StateCoverageConfig,
    watch: WatcherFactory | None = None,
    on_steps: Callable[[int], None] | None = None,
) -> list[EpisodeResult]:
    """Play all `jobs` on `envs` (see the module doc); results in the order of `jobs`."""
    n = envs.num_envs
    queue = deque(jobs)
    slots: list[_Slot | None] = [None] * n
    results: list[EpisodeResult] = []

    def start(mask: np.ndarray) -> None:
        """Reset the instances in `mask`, giving each the next job (or none: it idles)."""
        seeds: list[int | None] = [None] * n
        for i in np.flatnonzero(mask):
            slots[i] = None
            if queue:
                job = queue.popleft()
                seeds[i] = job.seed
                slots[i] = _Slot(job, agents[job.policy].initial_state(1), None)
        obs, infos = envs.reset(seed=seeds, options={"reset_mask": mask})
        for i in np.flatnonzero(mask):
            frames[i] = obs[i]
            slot = slots[i]
            if slot is not None:
                info = unbatch_info(infos, i)
                slot.result.states.add(state_key(obs[i], info, coverage))
                slot.watcher = watch(slot.result.job, obs[i], info) if watch else None

    frames: list[np.ndarray | None] = [None] * n
    start(np.ones(n, dtype=bool))
    while any(s is not None for s in slots):
        actions = _choose_actions(agents, slots, frames, spec)
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        ended = np.logical_or(terminations, truncations)
        if on_steps is not None:
            on_steps(sum(s is not None for s in slots))
        for i, slot in enumerate(slots):
            frames[i] = obs[i]
            if slot is None:
                continue
            info = unbatch_info(infos, i)
            _record_step(slot, int(actions[i]), obs[i], float(rewards[i]), info, bool(ended[i]), coverage)
            if ended[i]:
                results.append(slot.result)
        if ended.any():
            start(ended)
    order = {job: k for k, job in enumerate(jobs)}
    return sorted(results, key=lambda r: order[r.job])


def policy_scores(results: Sequence[EpisodeResult], num_policies: int) -> np.ndarray:
    """`num_policies×2`: Wuji's exploration score (mean states covered per episode) and winning
    score (mean total reward per episode) of each policy."""
    scores = np.zeros((num_policies, 2))
    counts = np.zeros(num_policies)
    for r in results:
        scores[r.job.policy] += (len(r.states), r.reward)
        counts[r.job.policy] += 1
    return scores / np.maximum(counts, 1)[:, None]
