"""`playtester run evolve`: Wuji's evolutionary testing, with oracles on every evaluation.

The population loop is `exploration.population.Evolution`; this adds what makes it a test run:
the crash, stuck and assertion oracles watch every evaluation episode, and each distinct finding
is saved with the episode's whole action trace and reset seed (`findings/NNNN/`), so that
`playtester replay` reproduces it. A finding's signature is its kind, its message and the state
it happened in; the first of each is saved, every occurrence is logged in `findings.jsonl`.

    runs/NAME/config.yaml         the game and the options
    runs/NAME/generations.jsonl   one line a generation: steps, states covered, best scores
    runs/NAME/findings.jsonl      every finding: kind, message, generation, policy, seed, folder
    runs/NAME/findings/NNNN/      one folder per distinct finding (see playtester.bugs.findings)
    runs/NAME/evolution.ckpt      the population after the last generation (--resume)
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import yaml

from playtester.files import holds_lines, new_folder, write_text_atomic
from playtester.errors import UserError
from playtester.evolution.evaluation import EvalJob
from playtester.evolution.population import Evolution, EvolutionConfig
from playtester.evolution.state_coverage import StateCoverageConfig, state_key
from playtester.bugs.findings import save_finding
from playtester.bugs.oracles import AssertionOracle, CrashOracle, Finding, StuckOracle, load_assertion
from playtester.tester.runlog import JsonlWriter

if TYPE_CHECKING:
    from playtester.tester.spec import EvolveSpec


class OracleWatch:
    """Makes the oracles of each evaluation episode; saves the distinct findings."""

    def __init__(self, run_dir: str | Path, game: str, game_options: dict[str, Any], *,
                 assertions: Sequence[str] = (), stuck_steps: int = 20, clip_frames: int = 32,
                 coverage: StateCoverageConfig | None = None, clock: Callable[[], int] | None = None,
                 say: Callable[[str], None] = lambda line: None):
        self.run_dir = Path(run_dir)
        self.game, self.game_options = game, dict(game_options)
        self.checks = [load_assertion(a) for a in assertions]
        self.stuck_steps, self.clip_frames = stuck_steps, clip_frames
        self.coverage = coverage or StateCoverageConfig()
        self.clock = clock or (lambda: 0)
        self.say = say
        """Says each crash on the console (as every kind of run does)."""
        self.signatures: dict[str, str] = {}
        """Signature → the folder of its first finding."""
        self.count = 0
        """Findings seen (every occurrence)."""

    def __call__(self, job: EvalJob, frame: np.ndarray, info: dict[str, Any]) -> "EpisodeOracles":
        return EpisodeOracles(self, job, frame, info)

    def state_dict(self) -> dict[str, Any]:
        return {"signatures": dict(self.signatures), "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.signatures, self.count = dict(state["signatures"]), int(state["count"])

    def report(self, finding: Finding, job: EvalJob, info: dict[str, Any], frame: np.ndarray,
               actions: list[int], frames: list[np.ndarray]) -> None:
        """Log one finding; save it when its signature is new."""
        where = state_key(frame, info, self.coverage)
        signature = f"{finding.kind}|{finding.details.get('assertion', '')}|{where!r}"
        finding.details.update(position=_plain(info.get("position")), generation=job.generation, policy=job.policy,
                               seed=job.seed, game_steps=self.clock(), signature=signature)
        folder = None
        if signature not in self.signatures:
            folder = f"{len(self.signatures):04d}"
            save_finding(self.run_dir / "findings" / folder, finding, game=self.game, game_options=self.game_options,
                         reset={"seed": job.seed, "options": None}, actions=actions, frames=frames, fps=10.0)
            self.signatures[signature] = folder
        self.count += 1
        if finding.kind == "crash":
            self.say(f"the game crashed in generation {job.generation} (policy {job.policy}, seed {job.seed}): {finding.message}")
        log = JsonlWriter(self.run_dir / "findings.jsonl")
        try:
            log.write(finding.to_dict() | {"folder": folder or self.signatures[signature], "new": folder is not None})
        finally:
            log.close()


def _plain(value: Any) -> Any:
    """JSON-friendly telemetry (tuples of numpy numbers → lists of floats)."""
    if value is None:
        return None
    return [float(v) for v in np.atleast_1d(np.asarray(value, dtype=np.float64))]


class EpisodeOracles:
    """Crash, stuck and assertion oracles over one evaluation episode, with its action trace."""

    def __init__(self, watch: OracleWatch, job: EvalJob, frame: np.ndarray, info: dict[str, Any]):
        self.watch, self.job = watch, job
        self.oracles = [CrashOracle(), StuckOracle(watch.stuck_steps), AssertionOracle(watch.checks)]
        self.actions: list[int] = []
        self.frames: deque[np.ndarray] = deque(maxlen=watch.clip_frames)
        for oracle in self.oracles:
            oracle.observe(frame, info, None, job.episode, 0)

    def step(self, action: int, frame: np.ndarray, reward: float, info: dict[str, Any], done: bool) -> None:
        self.actions.append(action)
        self.frames.append(frame.copy())
        for oracle in self.oracles:
            for finding in oracle.observe(frame, info, action, self.job.episode, len(self.actions)):
                self.watch.report(finding, self.job, info, frame, list(self.actions), list(self.frames))

    def close(self) -> None:
        pass


def run_evolve(cfg: EvolutionConfig, *, assertions: Sequence[str] = (), stuck_steps: int = 20,
               overwrite: bool = False, log: Callable[[str], None] = print, on_cluster: bool = False,
               options: dict[str, Any] | None = None) -> Evolution:
    """The whole `playtester run evolve` run in `cfg.run_dir` (see the module doc). `options`: the
    run's command-line options, by `playtester run evolve`'s names, for its config.yaml (what
    `--resume` and `--config` read back, as of every run)."""
    from playtester.options import inputs_checked

    out = Path(cfg.run_dir)
    if cfg.resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other; give one")
    if out.exists() and not cfg.resume and not overwrite:
        raise UserError(f"--out {out}: the run folder exists; give --resume to continue it or --overwrite to replace it")
    if cfg.resume and not (out / "evolution.ckpt").exists():
        raise UserError(f"--resume: {out} holds no evolution run to continue (no evolution.ckpt)")
    game_options = {**cfg.game_options, "max_steps": cfg.eval_steps}
    watch = OracleWatch(out, cfg.game, game_options, assertions=assertions, stuck_steps=stuck_steps, coverage=cfg.coverage(),
                        say=log)
    evolution = Evolution(cfg, watch, log, on_cluster)  # checks the game, its reward and the assertions first
    watch.clock = lambda: evolution.steps
    inputs_checked()
    # a reward that fails on the game's frames is found by the first evaluation: until generation 0
    # is recorded, a refusal leaves no run folder (and puts back the one --overwrite replaced)
    with new_folder(out, replace=overwrite and not cfg.resume, kept=lambda: holds_lines(out / "generations.jsonl")):
        out.mkdir(parents=True, exist_ok=True)
        if not cfg.resume:
            config = {"game": cfg.game, **(options or {}), "agent": "evolve explorer",
                      "assertions": list(assertions), "stuck_steps": stuck_steps, "evolution": asdict(cfg)}
            write_text_atomic(out / "config.yaml", yaml.safe_dump(config, sort_keys=False))
        evolution.run()
    return evolution


def run_evolve_command(spec: EvolveSpec, *, resume: bool, overwrite: bool, log: Callable[[str], None] = print,
                       on_cluster: bool = False) -> Evolution:
    """`playtester run evolve` from its spec; `on_cluster`: the games on Ray (started already)."""
    import torch

    torch.set_num_threads(1)  # small networks, a few frames a step: more threads only fight each other
    game, envs, out = spec.game, spec.num_envs, Path(spec.run_dir)
    if game.startswith("window:") and envs > 1:
        raise UserError(f"--envs {envs}: a window game is a single instance; give --envs 1")
    try:
        cfg = EvolutionConfig(game=game, run_dir=str(out), reward=spec.reward, population_size=spec.population,
                              generations=spec.generations, eval_steps=spec.steps, num_envs=envs, seed=spec.seed,
                              resume=resume, vector_env="async" if game.startswith("doom:") and envs > 1 else "sync")
    except ValueError as e:
        raise UserError(f"run evolve: {e}") from None
    options = {k: v for k, v in asdict(spec).items() if k not in ("game", "run_dir", "assertions", "stuck_steps")}
    evolution = run_evolve(cfg, assertions=spec.assertions, stuck_steps=spec.stuck_steps, overwrite=overwrite, log=log,
                           on_cluster=on_cluster, options=options)
    watch = evolution.watch
    log(f"{evolution.generation} generations, {evolution.steps} game steps, {len(evolution.states)} states covered, "
        f"{watch.count} findings ({len(watch.signatures)} distinct, in {out / 'findings'})")
    return evolution


def options_of_old_run(section: dict[str, Any]) -> dict[str, Any]:
    """The `playtester run evolve` options of a run from before they were written at the top of
    its config.yaml, from the `EvolutionConfig` it kept (its `evolution` section): the inverse of
    `run_evolve_command`'s, so that such a run still resumes from its folder alone."""
    given = {"reward": section.get("reward"), "population": section.get("population_size"),
             "generations": section.get("generations"), "steps": section.get("eval_steps"),
             "num_envs": section.get("num_envs"), "seed": section.get("seed")}
    return {name: value for name, value in given.items() if name == "reward" or value is not None}
