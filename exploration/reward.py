"""The explorer's reward hook for PPO: novelty (ensemble RND, E3B's episodic bonus) blended with the preference reward.

Per step it only keeps what it needs (the frame reached, the explorer's logits, the features of
the frame acted on, a look-up in the encoder the explorer shares with the path policy), so nothing
of it waits on the explorer's next decision. At the end of the rollout, in one batch over its
T × N steps: the raw novelty of every frame reached (`EnsembleRND.reward`, with the input
statistics as they stood when the rollout began, as CleanRL's RND does; the frames then join the
statistics and the replay buffer in step order); with `episodic_weight`, E3B's elliptical bonus of
every frame reached (`EllipticalEpisodicBonus`, on the path policy's frozen inverse-dynamics
features, each instance's C carried across rollouts and started again at each episode start); and,
with the preference, `r^p = −KL(π^e ‖ π^p)` on each frame acted on, the preference policy run over
the rollout's sequence from its recurrent state at the rollout's start. Then:

    r^rnd = raw RND novelty / running std of its discounted sum          (EnsembleRND)
    r^epi = raw episodic bonus / running std of its episodic sum         (EllipticalEpisodicBonus)
            (with `novelty_scale: step`, each / the running std of its per-step values instead)
    r^e   = w_rnd r^rnd + w_epi r^epi                                    (the novelty)
    α_t   = AlphaSchedule.step(r^e_t)                                    (per env, in time order)
    episodic stream      α r^p + (1 − α) w_epi r^epi   → value head 0, episodic
    non-episodic stream  (1 − α) w_rnd r^rnd           → value head 1, runs on across episode ends

so that the two streams add up to `r^c = α r^p + (1 − α) r^e`. Without the preference (the
Inspector baseline) α is 0 and the reward is pure novelty. With `rnd_weight` 0 there is no RND
(nothing built or trained) and no non-episodic stream. The RND predictors are trained on their
replay buffer after each rollout, on the PPO's Fabric (`setup(fabric)`, called by `ppo.train`), in
a `BackgroundJob` of their own until the next rollout's rewards need them.

`hand_off()` takes what the hook recorded of a rollout (its lists start anew for the next one) and
returns the work that computes the rollout's rewards from it, which `ppo.train` runs in the
update's thread while the games play on; `end_rollout()` does both at once. The episodic bonus's
C is carried from one rollout's rewards to the next, which run one after another.

`checkpoint_spec()` is what the PPO checkpoint keeps to rebuild the reward from the file alone
(`checkpoints.load_explorer`): the config, the number of games and the frozen preference policy;
`state_dict()` holds what changes as it trains (RND, its optimiser, α).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch import Tensor

from playtester.capture.frames import saved_frames
from playtester.errors import UserError
from playtester.exploration.background import BackgroundJob
from playtester.exploration.hook import ShapedRewards, StepView
from playtester.capture.envs import check_rgb_frames
from playtester.exploration.preference import AlphaSchedule, AlphaScheduleConfig, mix_rewards, preference_reward
from playtester.exploration.actor_critic import build_actor_critic
from playtester.exploration.rnd import EnsembleRND, RNDConfig, RunningMeanStd, frames_to_rnd_input, train_predictors
from playtester.exploration.episodic import EllipticalEpisodicBonus, EpisodicConfig


NOVELTY_SCALES = ("return", "step")


@dataclass
class ExplorationRewardConfig:
    """What the explorer is rewarded for."""

    rnd: RNDConfig = field(default_factory=RNDConfig)
    """The novelty model."""
    alpha: AlphaScheduleConfig = field(default_factory=AlphaScheduleConfig)
    """The adaptive mix of preference and novelty."""
    use_preference: bool = True
    """Add the preference reward (needs a preference policy); off for the Inspector baseline."""
    rnd_weight: float = 1.0
    """w_rnd: the weight of ensemble RND's (global, non-episodic) novelty in r^e; 0 leaves RND out."""
    episodic_weight: float = 0.0
    """w_epi: the weight of E3B's elliptical episodic bonus in r^e (needs the path policy, whose
    encoder gives the features); 0 leaves it out."""
    episodic: EpisodicConfig = field(default_factory=EpisodicConfig)
    """The episodic bonus."""
    novelty_scale: str = "return"
    """What each novelty is divided by: `return`, the running std of its discounted sum (CleanRL's
    RND; the novelty then comes out ~100× smaller than the preference term, docs/benchmarks/explorer.md),
    or `step`, the running std of its per-step values (unit scale, comparable with −KL)."""

    def __post_init__(self) -> None:
        if isinstance(self.rnd, dict):
            self.rnd = RNDConfig(**saved_frames(self.rnd, "frame_size"))  # a checkpoint from before the spec: its side
        if isinstance(self.alpha, dict):
            self.alpha = AlphaScheduleConfig(**self.alpha)
        if isinstance(self.episodic, dict):
            self.episodic = EpisodicConfig(**self.episodic)
        if self.rnd_weight < 0 or self.episodic_weight < 0:
            raise ValueError(f"novelty weights rnd_weight={self.rnd_weight}, episodic_weight={self.episodic_weight}: "
                             "give them as non-negative numbers")
        if self.rnd_weight == 0 and self.episodic_weight == 0:
            raise ValueError("novelty weights: rnd_weight and episodic_weight are both 0; the explorer needs a novelty term")
        if self.novelty_scale not in NOVELTY_SCALES:
            raise ValueError(f"novelty_scale {self.novelty_scale!r}: use {' or '.join(NOVELTY_SCALES)}")

    @property
    def uses_rnd(self) -> bool:
        return self.rnd_weight > 0

    @property
    def uses_episodic(self) -> bool:
        return self.episodic_weight > 0


class Recorded(NamedTuple):
    """What the hook kept of a rollout's steps, in time order (one entry a step)."""

    reached: list[np.ndarray]
    """The frames reached, `N×…` each."""
    inputs: list[Tensor]
    """The preference policy's inputs of the frames acted on (features of the shared encoder)."""
    logits: list[Tensor]
    """The explorer's logits on them."""
    episode_start: list[Tensor]
    """`N` bools: the frame acted on starts an episode."""


class ExplorationReward:
    """`RewardHook` for PPO: novelty (RND non-episodic, E3B's bonus episodic) and preference (episodic), mixed by α.

    `preference_policy` follows the `ActorCritic` protocol; it is frozen and run in inference
    mode: its logits give the preference reward, its `prepare` (the encoder the explorer shares)
    the episodic bonus's features. `rnd_frames` turns a batch of raw observations into RND
    input (`B×C×64×64`); by default frames are resized by the one resize. A reward built with
    `rnd_frames` or `rnd_trunk_factory` of its own cannot be rebuilt from a checkpoint.
    Everything runs on the CPU until `setup(fabric)` puts it on the Fabric's device.
    """

    def __init__(
        self,
        config: ExplorationRewardConfig,
        num_envs: int,
        preference_policy: nn.Module | None = None,
        rnd_frames: Callable[[np.ndarray], Tensor] | None = None,
        rnd_trunk_factory: Callable[[], nn.Module] | None = None,
    ):
        if config.use_preference and preference_policy is None:
            raise UserError("the preference reward is on but no preference policy was given; pass --preference CKPT or use the inspector mode")
        if config.uses_episodic and preference_policy is None:
            raise UserError("the episodic novelty reads the path policy's encoder features but no path policy was given; pass --preference CKPT")
        self.config = config
        self.num_envs = num_envs
        self.device = torch.device("cpu")
        self.non_episodic = config.uses_rnd
        """Whether `end_rollout` gives a non-episodic stream (RND's): PPO then trains two value heads."""
        self.rnd = EnsembleRND(config.rnd, trunk_factory=rnd_trunk_factory) if config.uses_rnd else None
        self.rnd_optimizer = self.rnd.configure_optimizer() if self.rnd is not None else None
        self.fabric: Any = None
        """The Fabric the predictors train on, once `setup`."""
        self.rebuildable = rnd_frames is None and rnd_trunk_factory is None
        self.rnd_frames = rnd_frames or (lambda obs: frames_to_rnd_input(obs, config.rnd.frames))
        self.alpha = AlphaSchedule(num_envs, config.alpha)
        self.training = BackgroundJob("rnd-training")
        """The predictors' training of the last rollout, from its rewards until the next rollout's."""
        self._last_loss = float("nan")
        self.preference_policy = None
        """The frozen path policy: the preference's logits and the episodic bonus's features."""
        self.episodic: EllipticalEpisodicBonus | None = None
        self.step_scale = {"rnd": RunningMeanStd(), "episodic": RunningMeanStd()}
        """With `novelty_scale: step`, the running statistics of each novelty's raw per-step values."""
        if config.use_preference or config.uses_episodic:
            self.preference_policy = preference_policy.eval()
            for p in self.preference_policy.parameters():
                p.requires_grad = False
            self.preference_state = self.preference_policy.initial_state(num_envs)
        if config.uses_episodic:
            if not getattr(self.preference_policy, "frozen_trunk", False):
                raise UserError("the episodic novelty needs a path policy with a frozen encoder (its features); "
                                "pass --preference with a policy from `playtester train policy`")
            self.episodic = EllipticalEpisodicBonus(config.episodic, self.preference_policy.policy_cfg.feature_dim, num_envs)
        self._clear()

    def setup(self, fabric: Any) -> None:
        """Train the RND predictors on `fabric` (module and optimiser set up by it, on its
        device); the preference policy moves to that device too."""
        self.fabric, self.device = fabric, fabric.device
        if self.rnd is not None:
            rnd = getattr(self.rnd, "module", self.rnd)  # set up before (an earlier run): unwrapped first
            optimizer = getattr(self.rnd_optimizer, "optimizer", self.rnd_optimizer)
            self.rnd, self.rnd_optimizer = fabric.setup(rnd, optimizer)
        if self.preference_policy is not None:
            self.preference_policy = fabric.to_device(self.preference_policy)
            self.preference_state = self.preference_policy.initial_state(self.num_envs)

    def check_game(self, observation_space: gym.Space, action_space: gym.Space, game: str) -> None:
        """Refuse, before training, a game without RGB frames or whose actions the preference policy lacks."""
        check_rgb_frames(observation_space, f"game {game!r}")
        if self.preference_policy is not None:
            n = getattr(action_space, "n", None)
            if n != self.preference_policy.num_actions:
                raise UserError(
                    f"game {game!r} has {n} actions but the preference policy acts over "
                    f"{self.preference_policy.num_actions}; use a preference policy trained with this game's key map"
                )

    def _clear(self) -> None:
        self._recorded = Recorded([], [], [], [])

    @torch.no_grad()
    def step(self, view: StepView) -> None:
        self._recorded.reached.append(np.array(view.next_obs))
        self._recorded.episode_start.append(view.episode_start.bool().cpu())
        if self.preference_policy is not None:
            # the explorer just encoded these frames: with a shared encoder this is a look-up (in the
            # thread that plays, where the encoder's last features are kept)
            self._recorded.inputs.append(self.preference_policy.prepare(torch.as_tensor(view.obs, device=self.device)))
            self._recorded.logits.append(view.logits.to(self.device))

    def wait_for_training(self) -> None:
        """Let the predictors' training started by the last rollout's rewards finish (its error, if
        any, is raised here); at once when none is running (or without RND)."""
        if self.training.running:
            self._last_loss = self.training.wait()

    def _train_in_background(self, seed: int) -> None:
        generator = torch.Generator(device=self.device).manual_seed(seed)
        self.training.start(functools.partial(train_predictors, self.rnd, self.rnd_optimizer, self.fabric, generator=generator))

    @torch.no_grad()
    def _rollout_rewards(self, recorded: Recorded, reached_features: Tensor | None) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """The rollout's raw RND novelty, raw episodic bonus and preference rewards (T×N each;
        None where the term is off)."""
        self.wait_for_training()
        steps = len(recorded.reached)
        raw = episodic = preference = None
        if self.rnd is not None:
            frames = self.rnd_frames(np.concatenate(recorded.reached))
            raw = self.rnd.reward(frames).reshape(steps, self.num_envs)
            self.rnd.observe(frames)
        if self.episodic is not None:
            episodic = self.episodic.rollout_bonus(torch.stack(recorded.inputs), reached_features,
                                                   torch.stack(recorded.episode_start))
        if self.config.use_preference:
            done = torch.stack(recorded.episode_start).to(self.device).float()
            out = self.preference_policy(torch.stack(recorded.inputs), self.preference_state, done)
            self.preference_state = out.state
            logits = torch.stack(recorded.logits)
            preference = preference_reward(logits.flatten(0, 1), out.logits.flatten(0, 1)).reshape(steps, self.num_envs).cpu()
        return raw, episodic, preference

    @torch.no_grad()
    def _reached_features(self, recorded: Recorded) -> Tensor:
        """The features of every frame reached (`T×N×D`): those of the next step's frame acted on,
        a look-up, except where an episode ended (its last frame) and at the rollout's last step,
        encoded here in one batch (in the thread that plays: the encoder is the explorer's)."""
        acted = torch.stack(recorded.inputs)
        reached = torch.empty_like(acted)
        reached[:-1] = acted[1:]
        new_episode = torch.stack(recorded.episode_start[1:] + [torch.ones(self.num_envs, dtype=torch.bool)])
        where = new_episode.nonzero().tolist()
        frames = np.stack([recorded.reached[t][i] for t, i in where])
        encoded = self.preference_policy.prepare(torch.as_tensor(frames, device=self.device))
        for (t, i), features in zip(where, encoded):
            reached[t, i] = features
        return reached

    def hand_off(self) -> Callable[[], ShapedRewards]:
        """The rollout just recorded, taken (the hook records the next one from here), as the work
        that computes its rewards and then starts the predictors' training on it. The training's
        seed is drawn here, in the thread that plays, so that the run's random draws keep their order
        wherever the work runs."""
        if self.fabric is None:
            raise RuntimeError("ExplorationReward.setup(fabric) was not called (ppo.train calls it before training)")
        recorded, seed = self._recorded, int(torch.randint(0, 2**62, (1,)))
        reached = self._reached_features(recorded) if self.episodic is not None else None
        self._clear()
        return functools.partial(self._rewards, recorded, reached, seed)

    def end_rollout(self) -> ShapedRewards:
        return self.hand_off()()

    def _rewards(self, recorded: Recorded, reached_features: Tensor | None, seed: int) -> ShapedRewards:
        config = self.config
        raw, raw_episodic, preference = self._rollout_rewards(recorded, reached_features)
        episode_start = torch.stack(recorded.episode_start)
        steps = episode_start.shape[0]
        zeros = torch.zeros(steps, self.num_envs)
        intrinsic = self.rnd.normalize_rewards(raw) if raw is not None else zeros
        episodic_bonus = self.episodic.normalize(raw_episodic, episode_start) if raw_episodic is not None else zeros
        if config.novelty_scale == "step":
            if raw is not None:
                intrinsic = self._per_step(raw, "rnd", self.rnd.warmed_up)
            if raw_episodic is not None:
                episodic_bonus = self._per_step(raw_episodic, "episodic", True)
        novelty = config.rnd_weight * intrinsic + config.episodic_weight * episodic_bonus
        if preference is not None:
            alpha = torch.stack([self.alpha.step(novelty[t], episode_start[t]) for t in range(steps)])
        else:
            preference = zeros
            alpha = torch.zeros_like(novelty)
        episodic = alpha * preference + (1.0 - alpha) * config.episodic_weight * episodic_bonus
        non_episodic = (1.0 - alpha) * config.rnd_weight * intrinsic if self.rnd is not None else None
        rnd_loss = float("nan")
        if self.rnd is not None:
            # The predictors are next needed for the next rollout's rewards; until then they train
            # beside it, on the replay and input statistics as they stand now (nothing changes them
            # in between), with a generator of their own. The loss logged is the last training's.
            rnd_loss = self._last_loss
            self._train_in_background(seed)
        logs = {
            "rewards/intrinsic_raw": float(raw.mean()) if raw is not None else 0.0,
            "rewards/intrinsic": float(intrinsic.mean()),
            "rewards/episodic_raw": float(raw_episodic.mean()) if raw_episodic is not None else 0.0,
            "rewards/episodic": float(episodic_bonus.mean()),
            "rewards/novelty": float(novelty.mean()),
            "rewards/preference": float(preference.mean()),
            "rewards/combined": float(mix_rewards(preference, novelty, alpha).mean()),
            "charts/alpha": float(alpha.mean()),
            "losses/rnd_loss": rnd_loss,
        }
        return ShapedRewards(episodic, non_episodic, logs)

    def _per_step(self, raw: Tensor, term: str, observed: bool) -> Tensor:
        """`raw` (`T×N`) divided by the running std of the term's per-step values, these included
        (RND's zeros before its warm-up are not folded in)."""
        stats = self.step_scale[term]
        if observed:
            stats.update(raw.detach().to(torch.float64).cpu().flatten())
        return (raw.detach().cpu().to(torch.float64) / (stats.std + 1e-8)).float()

    def state_dict(self) -> dict[str, Any]:
        # The preference policy's recurrent state and the episodic bonus's C are left out: a
        # resumed run starts new episodes, and their first step (episode_start) resets both.
        self.wait_for_training()
        state: dict[str, Any] = {"alpha": self.alpha.state_dict()}
        if self.rnd is not None:
            state.update(rnd=self.rnd.state_dict(), rnd_optimizer=self.rnd_optimizer.state_dict())
        if self.episodic is not None:
            state["episodic"] = self.episodic.state_dict()
        if self.config.novelty_scale == "step":
            state["step_scale"] = {term: stats.state_dict() for term, stats in self.step_scale.items()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.wait_for_training()
        if self.rnd is not None:
            rnd = dict(state["rnd"])
            old_optimizer = rnd.pop("_extra_state", {}).get("optimizer")  # before issue 21 the optimiser sat in the RND
            self.rnd.load_state_dict(rnd)
            self.rnd_optimizer.load_state_dict(state.get("rnd_optimizer", old_optimizer))
        if self.episodic is not None:
            self.episodic.load_state_dict(state["episodic"])
        for term, stats in state.get("step_scale", {}).items():
            self.step_scale[term].load_state_dict(stats)
        self.alpha.load_state_dict(state["alpha"])

    def checkpoint_spec(self) -> dict[str, Any] | None:
        """What rebuilds this reward with `from_checkpoint` (None when built with frames or an RND
        trunk of its own, which a file cannot hold)."""
        if not self.rebuildable:
            return None
        preference = None
        if self.preference_policy is not None:
            preference = {"spec": self.preference_policy.checkpoint_spec(), "weights": self.preference_policy.state_dict()}
        return {"class": f"{type(self).__module__}:{type(self).__qualname__}", "config": asdict(self.config),
                "num_envs": self.num_envs, "preference": preference}

    @classmethod
    def from_checkpoint(cls, spec: dict[str, Any], state: dict[str, Any]) -> "ExplorationReward":
        """The reward `checkpoint_spec` describes, with the trained `state`; on the CPU."""
        preference = None
        if spec["preference"] is not None:
            preference = build_actor_critic(spec["preference"]["spec"])
            preference.load_state_dict(spec["preference"]["weights"])
        reward = cls(ExplorationRewardConfig(**spec["config"]), int(spec["num_envs"]), preference_policy=preference)
        reward.load_state_dict(state)
        return reward
