"""DAgger: the trained policy drives, the scripted expert says what it would have done.

Behaviour cloning learns only from states the expert visits. Played on its own frames, the policy
makes small errors that take it where no demo went (off the pathway, too far from the object,
facing away) and it never saw the way back, so the errors compound. DAgger (Ross, Gordon and
Bagnell, 2011) plays the policy, mixed with the expert at rate `beta`, from the training starts
and has the expert label every state it reaches; training on the demos plus these episodes
teaches the recoveries. Each round adds episodes from the newest policy.

The episodes are ordinary demo episodes: `action` is what was executed (they replay, and train
the inverse-dynamics encoder); a step where the expert meant something else carries it as
`label` (what the policy learns). Their meta names the policy and `beta`. Starts and target OOIs come
from the policy's own training demos, so `eval policy` stays held out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.imitation.data import trained_on
from playtester.imitation.live import LivePolicy


class PolicyDriver:
    """Chooses the executed action: the expert's with probability `beta`, else one sampled from
    the policy's distribution for the newest frame. The policy sees every frame either way, so its
    memory holds the whole trajectory."""

    def __init__(self, live: LivePolicy, beta: float, rng: np.random.Generator) -> None:
        if not 0.0 <= beta <= 1.0:
            raise UserError(f"--beta {beta}: the expert's share of the driving must be between 0 and 1")
        self.live = live
        self.beta = beta
        self.rng = rng

    def reset(self) -> None:
        self.live.reset()

    def choose(self, frame: np.ndarray, box: Any, expert_action: int) -> int:
        probs = self.live.step(frame, box)
        policy_action = int(self.rng.choice(len(probs), p=probs / probs.sum()))
        return expert_action if self.rng.random() < self.beta else policy_action


def load_driver(ckpt: str | Path, behavior: str, keymap: KeyMap, beta: float, seed: int) -> tuple[PolicyDriver, dict[str, Any]]:
    """The policy of `ckpt` as a driver, checked against the behaviour and the game's key map,
    and its scoring data (the training demos' starts and targets)."""
    from playtester.imitation.live import load_policy

    live = load_policy(ckpt)
    if live.cfg.behavior and live.cfg.behavior != behavior:
        raise UserError(f"--dagger {ckpt}: it was trained on {live.cfg.behavior} demos, not {behavior}; pass --behavior {live.cfg.behavior}")
    if not keymap.same_actions(live.keymap):
        raise UserError(f"--dagger {ckpt}: its key map ({', '.join(live.keymap.names)}) differs from the game's "
                        f"({', '.join(keymap.names)}); train it on demos from this game")
    return PolicyDriver(live, beta, np.random.default_rng(seed + 7919)), live.scoring


def training_starts(scoring: dict[str, Any], ckpt: str | Path, game: str) -> list[int]:
    """Path starts (indices of `game`'s start points) of the policy's training demos on that game."""
    starts = sorted(trained_on(scoring, game)[0])
    if not starts:
        raise UserError(f"--dagger {ckpt}: its training demos name no start points on {game}{_trained_games(scoring)}")
    return starts


def training_targets(scoring: dict[str, Any], ckpt: str | Path, game: str) -> list[int]:
    """OOI ids the policy's training demos inspected on `game`."""
    targets = sorted(trained_on(scoring, game)[1])
    if not targets:
        raise UserError(f"--dagger {ckpt}: its training demos name no target OOIs on {game}{_trained_games(scoring)}")
    return targets


def _trained_games(scoring: dict[str, Any]) -> str:
    games = [g for g in scoring.get("demo_games") or [] if g]
    return f"; use --game {' or '.join(games)}" if games else "; retrain it on `playtester demos` episodes"
