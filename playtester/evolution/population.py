"""Wuji's loop: a population of policies evolved for exploration and winning, refined by PPO.

Each generation, from the population P (scored on exploration = states covered, winning = the
game's reward):

1. offspring P': parents by binary tournament on Pareto dominance, single-point crossover of
   their flattened weights (with probability `crossover_rate`), Gaussian mutation;
2. P' played on several game instances at once (`evaluation.evaluate`);
3. Q: every offspring trained by PPO on the game's reward, with early stopping, and played
   (Wuji as published); with `refine="improved"` only those that beat their first parent
   (better on one objective and worse on none), at a fraction of a generation's cost;
4. survivors: `population_size` of P ∪ P' ∪ Q by non-dominated sorting and crowding distance
   (or by the winning score alone with `objectives="winning"`, the paper's EA_S baselines).

Switching parts off gives the paper's baselines through the same code: `evolve=False` is RL
only (each member trained further, no selection), `train_offspring=False` is EA only,
`policy="random"` plays uniformly random actions. A checkpoint after every generation lets
`resume=True` continue the run. On a Ray cluster (`on_cluster`) every game instance, of the
evaluations and of the offspring's PPO, is a Ray actor, spread over the nodes; the generation's
line in `generations.jsonl` names the nodes its games played on.
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
import torch
import torch.nn as nn

from playtester.errors import UserError
from playtester.capture.frames import FrameSpec, saved_frames
from playtester.capture.games import probe_game
from playtester.evolution import operators as ea
from playtester.exploration.actor_critic import GRUActorCritic, GRUActorCriticConfig, RandomAgent, RandomAgentConfig, build_actor_critic
from playtester.exploration.checkpoints import load_checkpoint, save_checkpoint
from playtester.evolution.evaluation import EvalJob, WatcherFactory, evaluate, make_eval_envs, policy_scores
from playtester.capture.game_reward import check_game_reward
from playtester.exploration.ppo import PPOConfig, train
from playtester.exploration.ppo_config import saved_ppo_config
from playtester.evolution.state_coverage import StateCoverageConfig, default_state_features
from playtester.capture.envs import make_env

CHECKPOINT = "evolution.ckpt"
OBJECTIVES = ("exploration", "winning")


def default_offspring_ppo() -> PPOConfig:
    """PPO for one offspring: a short run that stops when its return stops improving."""
    return PPOConfig(total_timesteps=4096, num_envs=4, num_steps=64, num_minibatches=2, update_epochs=4,
                     learning_rate=5e-4, early_stop_patience=3, checkpoint_every=0, encoder="conv")


@dataclass
class EvolutionConfig:
    """A Wuji run: population, variation, offspring training, evaluations, budget."""

    game: str
    """Game spec (`make_game`)."""
    run_dir: str = "runs/evolve"
    """Folder for the checkpoint, `generations.jsonl` and the offspring's PPO logs."""
    reward: str | None = None
    """`module:function` over (frame, info) for the winning score; required where the game has
    no reward of its own (a window, the park)."""
    game_options: dict[str, Any] = field(default_factory=dict)
    """Options for `make_game` (e.g. `maze_seed`); findings record them for replay."""
    population_size: int = 30
    """Policies kept each generation (the paper's 30)."""
    generations: int = 10
    """Generations to run (the budget may stop it first)."""
    budget_steps: int = 0
    """Stop before a generation once this many game steps (evaluations + training) are spent; 0: none."""
    objectives: Literal["both", "winning"] = "both"
    """`both`: NSGA-II on exploration and winning; `winning`: the best winning scores survive."""
    evolve: bool = True
    """Make offspring by crossover and mutation; False: RL only (members trained further in place)."""
    train_offspring: bool = True
    """Train offspring with PPO on the game's reward; False: EA only."""
    refine: Literal["all", "improved"] = "improved"
    """Which offspring PPO trains: `improved`, those better than their first parent on one
    objective and worse on none (a generation at ×0.31 the game steps); `all`, every one (Wuji as
    published). On the Block Maze, 5 mazes at 100 000 steps, `improved` found as many bugs as
    `all` or more in every maze (4.4 against 3.6) and covered more states (59.2 against 48.2), and
    reached 30 generations in a third of the steps (docs/benchmarks/seeds.md)."""
    policy: Literal["gru", "random"] = "gru"
    """`gru`: the explorer's conv GRU actor-critic; `random`: uniformly random actions (baseline)."""
    eval_episodes: int = 2
    """Episodes per policy per evaluation (the scores are their means)."""
    eval_steps: int = 200
    """Step limit of an episode, in evaluations and in training."""
    num_envs: int = 4
    """Game instances that play evaluations at once."""
    vector_env: Literal["sync", "async"] = "sync"
    """`async`: one process per game instance (slow games); `sync`: all in this process."""
    frames: FrameSpec = field(default_factory=lambda: FrameSpec.square(64))
    """The frames the policies see (a saved config's `{width, height}` is read back as a spec)."""
    hidden_dim: int = 64
    """Encoder width of the policies."""
    rnn_dim: int = 64
    """GRU size of the policies."""
    crossover_rate: float = 0.9
    """Probability that an offspring is a crossover of two parents (else a copy of the first)."""
    mutation_rate: float = 0.1
    """Probability that each weight gets Gaussian noise."""
    mutation_sigma: float = 0.05
    """Standard deviation of the noise."""
    ppo: PPOConfig = field(default_factory=default_offspring_ppo)
    """Offspring training; its `total_timesteps` is the most one offspring trains, and
    `early_stop_patience` / `max_train_seconds` its early stop. Game, seed and network shape
    are set here."""
    state_features: dict[str, float] | None = None
    """Telemetry key → interval width for state coverage; None: suited to the game."""
    seed: int = 0
    """Seeds the initial weights, variation and every evaluation episode."""
    resume: bool = False
    """Continue the run in `run_dir` from its last finished generation."""

    def __post_init__(self) -> None:
        if isinstance(self.ppo, dict):
            self.ppo = saved_ppo_config(self.ppo)
        if self.population_size < 2 and self.evolve:
            raise ValueError(f"population_size={self.population_size}: evolution needs at least 2 policies")
        if min(self.population_size, self.generations, self.eval_episodes, self.eval_steps, self.num_envs) < 1:
            raise ValueError("population_size, generations, eval_episodes, eval_steps and num_envs must be at least 1")
        if self.refine not in ("improved", "all"):
            raise ValueError(f"refine={self.refine!r}: use 'improved' or 'all'")
        if self.objectives not in ("both", "winning"):
            raise ValueError(f"objectives={self.objectives!r}: use 'both' or 'winning'")
        if self.policy not in ("gru", "random"):
            raise ValueError(f"policy={self.policy!r}: use 'gru' or 'random'")
        if self.policy == "random" and (self.evolve or self.train_offspring):
            raise ValueError("policy='random' is neither evolved nor trained: set evolve=False and train_offspring=False")
        if not (0 <= self.crossover_rate <= 1 and 0 <= self.mutation_rate <= 1 and self.mutation_sigma >= 0):
            raise ValueError("crossover_rate and mutation_rate must lie in [0, 1], mutation_sigma ≥ 0")
        self.frames = FrameSpec.from_dict(self.frames)
        if min(self.frames.size) < 36:
            raise ValueError(f"frames {self.frames.width}×{self.frames.height}: the conv encoder needs at least 36 pixels")
        if self.budget_steps < 0:
            raise ValueError(f"budget_steps={self.budget_steps} must be ≥ 0 (0: no budget)")

    def coverage(self) -> StateCoverageConfig:
        return StateCoverageConfig(features=self.state_features or default_state_features(self.game))


@dataclass
class Member:
    """One policy of the population, with where it came from and its scores."""

    agent: nn.Module
    origin: str
    """`initial`, `offspring` (crossover + mutation) or `trained` (an offspring after PPO)."""
    born: int
    """Generation it was made in."""
    scores: np.ndarray | None = None
    """(exploration, winning)."""
    parent: "Member | None" = None
    """The first parent of an offspring (what `refine="improved"` compares it with); not saved."""


class Evolution:
    """The loop of the module doc; `run()` plays it out, checkpointing each generation."""

    def __init__(self, cfg: EvolutionConfig, watch: WatcherFactory | None = None, log: Callable[[str], None] = print,
                 on_cluster: bool = False):
        if cfg.policy == "gru" or cfg.train_offspring:
            check_game_reward(cfg.game, cfg.reward)
        self.cfg, self.watch, self.log, self.on_cluster = cfg, watch, log, on_cluster
        self.nodes: set[str] = set()
        """The Ray nodes the generation's games played on (`on_cluster`)."""
        self.run_dir = Path(cfg.run_dir)
        self.coverage_cfg = cfg.coverage()
        self.rng = np.random.default_rng(cfg.seed)
        self.torch_rng = torch.Generator().manual_seed(cfg.seed)
        self.population: list[Member] = []
        self.generation = 0
        self.steps = 0
        self.seconds = 0.0
        self.episodes = 0
        self.states: set = set()
        self.history: list[dict[str, Any]] = []
        self._game_options = {**cfg.game_options, "max_steps": cfg.eval_steps}
        self.num_actions = int(probe_game(cfg.game, **self._game_options).action_space.n)

    # -- policies ---------------------------------------------------------------------------
    def new_agent(self, seed: int) -> nn.Module:
        cfg = self.cfg
        if cfg.policy == "random":
            return RandomAgent(RandomAgentConfig(num_actions=self.num_actions))
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return GRUActorCritic(GRUActorCriticConfig(
                obs_shape=cfg.frames.shape, num_actions=self.num_actions, encoder="conv",
                hidden_dim=cfg.hidden_dim, rnn_dim=cfg.rnn_dim, num_values=1))

    def vary(self, scores: np.ndarray) -> Member:
        """One offspring: tournament parents, single-point crossover, Gaussian mutation."""
        first = self.population[ea.binary_tournament(scores, self.rng)]
        father, mother = first.agent, self.population[ea.binary_tournament(scores, self.rng)].agent
        weights = ea.flat_weights(father)
        if self.rng.random() < self.cfg.crossover_rate:
            weights = ea.single_point_crossover(weights, ea.flat_weights(mother), ea.crossover_point(len(weights), self.rng))
        child = copy.deepcopy(father)
        ea.load_flat_weights(child, ea.gaussian_mutation(weights, self.cfg.mutation_sigma, self.cfg.mutation_rate, self.torch_rng))
        return Member(child, "offspring", self.generation, parent=first)

    def refine(self, agent: nn.Module, index: int) -> nn.Module:
        """PPO on the game's reward, early stopped; returns a trained copy."""
        cfg = self.cfg
        run = self.run_dir / "ppo" / f"g{self.generation:03d}-o{index:02d}"
        shutil.rmtree(run, ignore_errors=True)  # a generation redone after an interruption
        ppo_cfg = replace(cfg.ppo, env_id=cfg.game, run_dir=str(run), seed=cfg.seed * 10_007 + self.generation * 101 + index,
                          frames=cfg.frames, encoder="conv", hidden_dim=cfg.hidden_dim, rnn_dim=cfg.rnn_dim,
                          vector_env=cfg.vector_env, resume=False)
        env_fn = functools.partial(make_env, cfg.game, cfg.frames, reward=cfg.reward, game_options=self._game_options)
        if self.on_cluster:
            from playtester.exploration.ray_env import RayInstances

            env_fn = RayInstances([env_fn] * ppo_cfg.num_envs)
        result = train(ppo_cfg, copy.deepcopy(agent), None, env_fn)
        shutil.rmtree(run / "checkpoints", ignore_errors=True)  # the population checkpoint holds the weights
        self.steps += result.global_step
        return result.agent

    # -- evaluation -------------------------------------------------------------------------
    def score(self, members: list[Member]) -> None:
        """Play `eval_episodes` per member on `num_envs` instances; set their scores."""
        cfg = self.cfg
        jobs = []
        for p in range(len(members)):
            for e in range(cfg.eval_episodes):
                jobs.append(EvalJob(p, e, cfg.seed * 1_000_003 + self.episodes, self.generation))
                self.episodes += 1
        envs = make_eval_envs(functools.partial(game_env, cfg.game, cfg.reward, self._game_options), cfg.num_envs, cfg.vector_env,
                              self.on_cluster)
        try:
            results = evaluate([m.agent for m in members], jobs, envs, cfg.frames, self.coverage_cfg,
                               self.watch, self._count_steps)
            self.nodes |= {node for node in getattr(envs, "nodes", ()) if node}
        finally:
            envs.close()
        for r in results:
            self.states |= r.states
        for m, s in zip(members, policy_scores(results, len(members))):
            m.scores = s

    def _count_steps(self, n: int) -> None:
        self.steps += n

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> list[Member]:
        cfg = self.cfg
        ckpt_path = self.run_dir / CHECKPOINT
        if cfg.resume:
            self.load(ckpt_path)
        elif ckpt_path.exists():
            raise UserError(f"{ckpt_path} exists: resume that run, or choose another run folder")
        start = time.time() - self.seconds
        if not self.population:
            self.population = [Member(self.new_agent(cfg.seed * 7919 + i), "initial", 0) for i in range(cfg.population_size)]
            self.score(self.population)
            self.seconds = time.time() - start
            self.record()
        while self.generation < cfg.generations:
            if cfg.budget_steps and self.steps >= cfg.budget_steps:
                self.log(f"budget of {cfg.budget_steps} steps spent after generation {self.generation}")
                break
            self.generation += 1
            self.step_generation()
            self.seconds = time.time() - start
            self.record()
        return self.population

    def step_generation(self) -> None:
        cfg, parents = self.cfg, self.population
        scores = np.stack([m.scores for m in parents])
        if not cfg.evolve:  # RL only, or the random baseline: the members play on, no selection
            if cfg.train_offspring:
                self.population = [Member(self.refine(m.agent, i), "trained", self.generation) for i, m in enumerate(parents)]
            self.score(self.population)
            return
        offspring = [self.vary(scores) for _ in range(cfg.population_size)]
        self.score(offspring)
        trained = []
        if cfg.train_offspring:
            chosen = [m for m in offspring if cfg.refine == "all" or improves(m.scores, m.parent.scores)]
            trained = [Member(self.refine(m.agent, i), "trained", self.generation) for i, m in enumerate(chosen)]
            if trained:
                self.score(trained)
        for m in offspring:
            m.parent = None  # the parent's weights need not outlive the generation
        pool = parents + offspring + trained
        pool_scores = np.stack([m.scores for m in pool])
        if cfg.objectives == "both":
            keep = ea.select_survivors(pool_scores, cfg.population_size)
        else:
            keep = ea.select_by_objective(pool_scores, cfg.population_size, OBJECTIVES.index("winning"))
        self.population = [pool[i] for i in keep]

    # -- records and checkpoints ------------------------------------------------------------
    def best(self) -> dict[str, float]:
        scores = np.stack([m.scores for m in self.population])
        return {f"best_{name}": float(scores[:, k].max()) for k, name in enumerate(OBJECTIVES)} | {
            f"mean_{name}": float(scores[:, k].mean()) for k, name in enumerate(OBJECTIVES)}

    def record(self) -> None:
        """Append the generation to `generations.jsonl` and checkpoint the run."""
        row = {"generation": self.generation, "steps": self.steps, "seconds": round(self.seconds, 2),
               "episodes": self.episodes, "states_covered": len(self.states), **self.best(),
               "origins": [m.origin for m in self.population]}
        if hasattr(self.watch, "count"):
            row["findings"] = self.watch.count
        if self.on_cluster:
            row["nodes"], self.nodes = sorted(self.nodes), set()
        self.history.append(row)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / "generations.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        self.log(f"generation {self.generation}: {self.steps} steps, {len(self.states)} states, "
                 f"best exploration {row['best_exploration']:.1f}, best winning {row['best_winning']:.2f}")
        save_checkpoint(self.run_dir / CHECKPOINT, {
            "config": asdict(self.cfg), "generation": self.generation, "steps": self.steps, "seconds": self.seconds,
            "episodes": self.episodes, "states": self.states, "history": self.history,
            "agent_spec": self.population[0].agent.checkpoint_spec(),
            "members": [{"agent": m.agent.state_dict(), "origin": m.origin, "born": m.born, "scores": m.scores}
                        for m in self.population],
            "rng": self.rng.bit_generator.state, "torch_rng": self.torch_rng.get_state(),
            "watch": self.watch.state_dict() if hasattr(self.watch, "state_dict") else None,
        })

    def load(self, path: Path) -> None:
        ckpt = load_checkpoint(path)
        saved = EvolutionConfig(**saved_frames(ckpt["config"], "frame_size"))  # a run from before the spec: its side
        if saved.refine != self.cfg.refine:  # not an option of `run evolve`: a run refines as it began (before the default changed)
            self.cfg = replace(self.cfg, refine=saved.refine)
        changed = [k for k in ("game", "population_size", "objectives", "evolve", "train_offspring", "refine", "policy", "frames",
                               "hidden_dim", "rnn_dim", "seed") if getattr(saved, k) != getattr(self.cfg, k)]
        if changed:
            raise UserError(f"resume {path}: {', '.join(changed)} differ{'s' if len(changed) == 1 else ''} from the saved run; resume with the same options")
        for key in ("generation", "steps", "seconds", "episodes", "states", "history"):
            setattr(self, key, ckpt[key])
        self.population = []
        for m in ckpt["members"]:
            agent = build_actor_critic(ckpt["agent_spec"])
            agent.load_state_dict(m["agent"])
            self.population.append(Member(agent, m["origin"], m["born"], m["scores"]))
        self.rng.bit_generator.state = ckpt["rng"]
        self.torch_rng.set_state(ckpt["torch_rng"])
        if ckpt.get("watch") is not None and hasattr(self.watch, "load_state_dict"):
            self.watch.load_state_dict(ckpt["watch"])
        self.log(f"resumed {path} after generation {self.generation} ({self.steps} steps)")


def improves(child: np.ndarray, parent: np.ndarray) -> bool:
    """Whether an offspring's scores beat its parent's: better on one objective, worse on none."""
    return ea.dominates(np.asarray(child), np.asarray(parent))


def game_env(game: str, reward: str | None = None, game_options: dict[str, Any] | None = None) -> gym.Env:
    """One game instance with the winning objective's reward, frames as the game gives them (`make_env`)."""
    from playtester.capture.envs import make_env

    return make_env(game, reward=reward, game_options=game_options)
