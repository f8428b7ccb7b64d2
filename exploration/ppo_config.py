"""`PPOConfig`, the recurrent PPO's settings (CleanRL's defaults), and what a resumed run must keep."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from playtester.capture.frames import FrameSpec, saved_frames
from playtester.errors import UserError


@dataclass
class PPOConfig:
    """Recurrent PPO. Defaults are CleanRL's; `scripts/bench_ppo.py` shows a tuned CartPole set."""

    env_id: str = "state:CartPole-v1"
    """`state:ID` for a Gymnasium env's own observations (tests, benchmarks), or a game spec
    `make_game` understands (`gym:ID` renders pixels, `doom:park`, …), resized to `frames`."""
    seed: int = 1
    """Seeds Python, NumPy, torch and the environments."""
    torch_deterministic: bool = True
    """`torch.backends.cudnn.deterministic`."""
    accelerator: str = "cpu"
    """Lightning Fabric accelerator: `cpu`, `cuda`, `auto`."""
    run_dir: str = "runs/ppo"
    """Folder for TensorBoard logs and checkpoints."""
    total_timesteps: int = 100_000
    """Environment steps to train for, over all environments."""
    num_envs: int = 8
    """Game instances run at once."""
    vector_env: Literal["async", "sync"] = "sync"
    """`async`: one process per game (`AsyncVectorEnv`, for slow games); `sync`: all in this process."""
    lockstep: bool = False
    """With `async` and several games, step them together (`collect_rollout`) instead of each as
    soon as it answers (`exploration/free_rollout.py`): for comparisons; the rollouts are the same
    kind either way."""
    acting: Literal["fp32", "int8"] = "fp32"
    """Precision of the rollout's decisions: `fp32`, or `int8` (a frozen encoder's convolutions
    int8 for the whole run, and a copy of the actor-critic with its GRUs and linear layers
    quantised, made anew before each rollout; PPO still learns in fp32; CPU only:
    `exploration/acting.py`)."""
    overlap_update: bool = True
    """Run each rollout's update in a thread while the games play the next rollout, instead of
    between rollouts while they wait: each rollout is then played by the weights from before the
    update beside it, one update behind (as asynchronous PPO does; the rollout's log-probabilities
    are that copy's, and PPO's clip bounds the gap as it does `acting="int8"`'s). Costs a second
    rollout buffer and a copy of the network a rollout; the explorer's loop ×1.15 at one mix, with
    no measured cost to what it covers (docs/benchmarks/ppo-and-loop.md). A resumed run plays its
    first rollout with the saved weights, where the uninterrupted one was one update behind. False:
    the update between rollouts, while the games wait (CleanRL's loop)."""
    frames: FrameSpec = field(default_factory=lambda: FrameSpec.square(64))
    """The frames pixel games are resized to (`capture/frames.py`); a saved config's `{width,
    height}` is read back as a spec. Ignored for `state:` envs."""
    num_steps: int = 128
    """Steps per environment per rollout (the sequence length of the recurrent updates)."""
    learning_rate: float = 2.5e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to zero over training."""
    gamma: float = 0.99
    """Discount of the episodic stream."""
    int_gamma: float = 0.99
    """Discount of the non-episodic (intrinsic) stream."""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation."""
    num_minibatches: int = 4
    """Minibatches per epoch; each holds `num_envs / num_minibatches` whole environment sequences
    (with `seq_len`, that many of the rollout's sequences of `seq_len` steps)."""
    seq_len: int = 0
    """Cut each environment's `num_steps` into sequences of this many steps for the update, each
    starting from the recurrent state the rollout had there (truncated backpropagation through
    time, as sb3-contrib's RecurrentPPO does): a minibatch then holds several short sequences side
    by side instead of one long one, which a CPU runs far faster for a large GRU. 0 (or
    `num_steps`): whole rollouts, gradients through all of it (CleanRL)."""
    update_epochs: int = 4
    """Passes over each rollout."""
    norm_adv: bool = True
    """Normalise advantages per minibatch (inside `policy_loss`)."""
    clip_coef: float = 0.2
    """PPO's ratio clip."""
    clip_vloss: bool = True
    """Clip the value update like the policy's (CleanRL's default; SB3's is off)."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Gradient clipping by global norm."""
    target_kl: float | None = None
    """Stop the epochs of an update early when the approximate KL passes this."""
    ext_coef: float = 1.0
    """Weight of the episodic stream's advantages."""
    int_coef: float = 1.0
    """Weight of the non-episodic stream's advantages (used only with a hook that has one)."""
    early_stop_patience: int = 0
    """Stop once this many updates in a row finished episodes without beating the best mean
    episodic return so far (Wuji's early stop for offspring); 0: never. Updates in which no
    episode finished do not count."""
    max_train_seconds: float = 0.0
    """Stop after this many seconds of training (checked after each update); 0: no limit."""
    env_reward_coef: float = 1.0
    """Weight of the game's own reward in the episodic stream (0 for pure exploration)."""
    encoder: Literal["mlp", "conv"] = "mlp"
    """Encoder of the default `GRUActorCritic`: `mlp` for state vectors, `conv` for frames."""
    hidden_dim: int = 64
    """Encoder width of the default actor-critic."""
    rnn_dim: int = 64
    """GRU size of the default actor-critic."""
    checkpoint_every: int = 10
    """Save a checkpoint every this many updates (and always at the end); 0: only at the end."""
    log_every: int = 1
    """Write TensorBoard scalars every this many updates."""
    resume: bool = False
    """Continue the run saved in `run_dir` from its last checkpoint: same step, weights, optimiser,
    reward-hook state and random number generators. The training options must match; only
    `total_timesteps` may be raised (and where to run and how often to log or save may change).
    The games' own state cannot be saved in general: the resumed run starts new episodes."""

    def __post_init__(self) -> None:
        if self.num_envs < 1 or self.num_steps < 1:
            raise ValueError(f"num_envs={self.num_envs} and num_steps={self.num_steps} must be at least 1")
        if self.num_minibatches < 1 or self.num_envs % self.num_minibatches:
            raise ValueError(
                f"num_envs={self.num_envs} must be a multiple of num_minibatches={self.num_minibatches}: "
                "minibatches are cut by environment so that recurrent sequences stay whole"
            )
        if self.total_timesteps < self.batch_size:
            raise ValueError(f"total_timesteps={self.total_timesteps} is less than one rollout (num_envs × num_steps = {self.batch_size})")
        if self.vector_env not in ("async", "sync"):
            raise ValueError(f"vector_env={self.vector_env!r}: use 'async' or 'sync'")
        if not (0 <= self.gamma <= 1 and 0 <= self.int_gamma <= 1 and 0 <= self.gae_lambda <= 1):
            raise ValueError("gamma, int_gamma and gae_lambda must lie in [0, 1]")
        if self.learning_rate <= 0 or self.clip_coef <= 0 or self.update_epochs < 1:
            raise ValueError("learning_rate and clip_coef must be positive, update_epochs at least 1")
        if self.early_stop_patience < 0 or self.max_train_seconds < 0:
            raise ValueError(f"early_stop_patience={self.early_stop_patience} and max_train_seconds={self.max_train_seconds} must be ≥ 0 (0 turns them off)")
        if self.acting not in ("fp32", "int8"):
            raise ValueError(f"acting={self.acting!r}: use 'fp32' or 'int8'")
        if self.acting == "int8" and self.accelerator != "cpu":
            raise ValueError(f"acting='int8' quantises for the CPU; with accelerator={self.accelerator!r} use 'fp32'")
        if self.seq_len < 0 or (self.seq_len and self.num_steps % self.seq_len):
            raise ValueError(f"seq_len={self.seq_len} must divide num_steps={self.num_steps} (or be 0: whole rollouts)")
        self.frames = FrameSpec.from_dict(self.frames)
        if min(self.frames.size) < 36:
            raise ValueError(f"frames {self.frames.width}×{self.frames.height}: the conv encoder needs at least 36 pixels")

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


def saved_ppo_config(config: dict[str, Any]) -> PPOConfig:
    """The `PPOConfig` a checkpoint saved (one from before the frame spec kept `frame_size`)."""
    return PPOConfig(**saved_frames(config, "frame_size"))


def check_resumable(saved: PPOConfig, now: PPOConfig) -> None:
    """A resumed run must match the saved one, except that it may train for longer."""
    free = ("resume", "total_timesteps", "run_dir", "accelerator", "checkpoint_every", "log_every", "lockstep", "acting",
            "overlap_update")
    changed = [f.name for f in fields(PPOConfig) if f.name not in free and getattr(saved, f.name) != getattr(now, f.name)]
    if changed:
        raise UserError(f"--resume: the options {', '.join(changed)} differ from the saved run in {now.run_dir}; resume with the same training options (total_timesteps may be raised)")
    if now.num_iterations < saved.num_iterations:
        raise UserError(f"--resume: total_timesteps={now.total_timesteps} is less than the saved run's {saved.total_timesteps}")
