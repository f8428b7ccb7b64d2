"""Playing for load testing: the games the load agent trains on, and episodes played for their
frame times (the baseline run that sets the threshold, and the evaluation of trained agents).

Episodes are played one game at a time, in this process, with nothing else stepping between the
timer's start and stop: the frame time of a step is the engine's alone (RELINE measured in the
same way, without threads).
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from playtester.errors import UserError
from playtester.capture.timing import require_frame_time, warm_up


def load_env(game: str, frames: Any, max_steps: int) -> gym.Env:
    """One game as the explorer sees it (OD-masked, resized to the `FrameSpec` `frames`), with
    episodes of `max_steps` steps: the load reward's end-of-episode bonus needs episodes that end."""
    from playtester.capture.envs import make_env

    return make_env(game, frames, mask=True, game_options={"max_steps": max_steps})


@torch.no_grad()
def play_episodes(
    agent: nn.Module,
    env: gym.Env,
    episodes: int,
    *,
    game: str,
    seed: int = 0,
    warmup_steps: int = 20,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Play `episodes` episodes with `agent` (any `ActorCritic`, sampling its actions) and return one
    record a step: `episode`, `t`, `action`, `frame_time_ms`, and `position` with telemetry.

    A game that reports no frame time is refused at its first step, saying what to enable.
    """
    if episodes < 1:
        raise UserError(f"episodes {episodes}: play at least one")
    agent.eval()
    device = next((b.device for b in list(agent.parameters()) + list(agent.buffers())), torch.device("cpu"))
    generator = torch.Generator(device="cpu").manual_seed(seed)
    warm_up(env, warmup_steps, seed=seed)
    records: list[dict[str, Any]] = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        state = agent.initial_state(1)
        done = torch.ones(1, 1, device=device)
        t = 0
        while True:
            x = agent.prepare(torch.as_tensor(obs[None], device=device))
            out = agent(x.unsqueeze(0), state, done)
            state, done = out.state, torch.zeros(1, 1, device=device)
            probs = torch.softmax(out.logits[0, 0].float().cpu(), -1)
            action = int(torch.multinomial(probs, 1, generator=generator))
            obs, _, terminated, truncated, info = env.step(action)
            record = {"episode": episode, "t": t, "action": action, "frame_time_ms": require_frame_time(info, game)}
            if info.get("position") is not None:
                record["position"] = [float(v) for v in info["position"]]
            records.append(record)
            if on_step is not None:
                on_step(record)
            t += 1
            if terminated or truncated:
                break
    return records


def frame_times(records: list[dict[str, Any]]) -> np.ndarray:
    return np.array([r["frame_time_ms"] for r in records], dtype=float)


def measure_baseline(game: str, episodes: int, steps: int, *, seed: int = 0, sigmas: float = 5.0):
    """`t_b` from `episodes` episodes of uniform random play on a fresh instance of `game` (its
    frame times only: nothing is written). RELINE took its baseline from an agent trained to play;
    random play is the stand-in when there is none."""
    from playtester.capture.envs import make_env
    from playtester.exploration.actor_critic import RandomAgent, RandomAgentConfig
    from playtester.load.reward import LoadThreshold

    env = make_env(game, game_options={"max_steps": steps})
    try:
        agent = RandomAgent(RandomAgentConfig(num_actions=int(env.action_space.n)))
        records = play_episodes(agent, env, episodes, game=game, seed=seed)
    finally:
        env.close()
    return LoadThreshold.from_baseline(frame_times(records), sigmas=sigmas)


def with_load_reward(explorer: Any, threshold: Any, config: Any, *, area: Any = None, game: str = "the game",
                     on_shift: Callable[[Any], None] | None = None) -> Any:
    """The explorer (`build_explorer`'s `Explorer`) with `LoadReward` wrapped around its reward hook."""
    from playtester.load.reward import LoadReward

    if explorer.hook is None:
        raise UserError("--objective load trains the PPO explorer; the random explorer learns nothing (use --explorer inspector or ppgta)")
    hook = LoadReward(config, threshold, explorer.cfg.num_envs, inner=explorer.hook, area=area, game=game, on_shift=on_shift)
    return explorer._replace(hook=hook)
