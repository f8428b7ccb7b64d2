"""What a reward hook is to PPO: the view of one vector step it is shown, the rewards it gives
back for a rollout, and the protocol it follows (`RewardHook`). The explorer's reward
(`reward.py`), a load test's (`playtester/load/reward.py`) and PPO's rollout collectors
(`rollout.py`, `free_rollout.py`) share these types; PPO's loop (`ppo.py`) calls the hook.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np
from torch import Tensor


class StepView(NamedTuple):
    """What a reward hook sees of one vector step."""

    obs: np.ndarray
    """Raw observations the actions were taken on, `N×…`."""
    logits: Tensor
    """The explorer's action logits on `obs`, `N×A`."""
    episode_start: Tensor
    """`N` bools: `obs` is the first observation of an episode."""
    next_obs: np.ndarray
    """Raw observations reached (the final one where an episode ended), `N×…`."""
    infos: dict[str, Any] | None = None
    """The vector env's `infos` of this step (telemetry such as `frame_time_ms`; the ended
    episodes' own in `final_info`)."""
    dones: np.ndarray | None = None
    """`N` bools: the episode ended (terminated or truncated) in this step."""


class ShapedRewards(NamedTuple):
    """A hook's rewards for a whole rollout."""

    episodic: Tensor
    """`T×N`, added to the game's reward in the episodic stream."""
    non_episodic: Tensor | None
    """`T×N` for the non-episodic stream (needs an actor-critic with 2 value heads), or None."""
    logs: dict[str, float]
    """Scalars to log (`rewards/…`, `charts/alpha`, `losses/…`)."""


class RewardHook(Protocol):
    """Extra rewards computed from what the agent sees (the explorer's novelty and preference).

    Optional: `setup(fabric)`, called once before any step, to train the hook's own models on the
    run's Fabric; `checkpoint_spec()`, what the checkpoint keeps to rebuild the hook from the file
    alone (`checkpoints.load_explorer`); `hand_off()`, the rollout just recorded taken (the hook
    records the next one from then on) as the work that returns its rewards, which `train` runs in
    the update's thread while the games play on (`rollout_rewards`).
    """

    non_episodic: bool
    """Whether `end_rollout` returns a non-episodic stream."""

    def step(self, view: StepView) -> None:
        """Record one vector step (called after the env step, before the next action)."""
        ...

    def end_rollout(self) -> ShapedRewards:
        """Rewards of the rollout just recorded; also the moment to train the hook's own models."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
