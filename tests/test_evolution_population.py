"""Wuji's loop on the Block Maze: the game and its injected bugs, evaluations on a vector env, a
population that improves both objectives, oracles whose findings replay, resume, bad input."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import yaml
from gymnasium.utils.env_checker import check_env

from playtester.capture.block_maze import ENV_ID, BlockMaze, distances
from playtester.errors import UserError
from playtester.capture.frames import FrameSpec
from playtester.capture.games import make_game
from playtester.exploration.actor_critic import RandomAgent, RandomAgentConfig
from playtester.evolution.evaluation import EvalJob, evaluate, make_eval_envs, policy_scores
from playtester.capture.game_reward import check_game_reward
from playtester.evolution.population import game_env
from playtester.evolution.population import Evolution, EvolutionConfig, default_offspring_ppo
from playtester.evolution.state_coverage import StateCoverageConfig
from playtester.evolution.run import run_evolve
from playtester.bugs.findings import replay_finding
from playtester.tester.runlog import read_jsonl

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MAZE = f"gym:{ENV_ID}"
ASSERT = "playtester.capture.block_maze:health_in_range"


def test_block_maze_is_a_game_with_bugs_near_far_and_off_route():
    check_env(make_game(MAZE, frame_timing=False).unwrapped)
    for seed in range(4):
        maze = BlockMaze(maze_seed=seed)
        from_start, to_coin = distances(maze.blocks, maze.start), distances(maze.blocks, maze.coin)
        total = from_start[maze.coin[1], maze.coin[0]]
        assert total > 0 and {b.region for b in maze.bugs} == {"near", "far", "off_route"}
        assert {b.kind for b in maze.bugs} == {"crash", "stuck", "logic"}
        for bug in maze.bugs:
            x, y = bug.cell
            on_route = from_start[y, x] + to_coin[y, x] == total
            assert not (bug.kind in ("crash", "stuck") and on_route), "a blocking bug on the way makes the game unwinnable"
            if bug.region == "near":
                assert from_start[y, x] <= max(4, total // 4)
            if bug.region == "off_route":
                assert not on_route


def test_no_crash_or_freeze_hides_another_bug_or_the_coin():
    """A crash or a freeze ends what an episode can reach past it: with every crash and freeze cell
    walled off but its own, each bug and the coin can still be walked to from the start (four
    of the first five mazes once had a bug cut off: maze 3 six of its nine)."""
    for seed in range(40):
        maze = BlockMaze(maze_seed=seed)
        enders = {b.cell for b in maze.bugs if b.kind != "logic"}
        assert len(maze.bugs) >= 7, "a maze keeps most of its nine bugs"
        for target in [b.cell for b in maze.bugs] + [maze.coin]:
            walls = maze.blocks.copy()
            for x, y in enders - {target}:
                walls[y, x] = True
            assert distances(walls, maze.start)[target[1], target[0]] >= 0, f"maze {seed}: {target} is cut off"


def test_block_maze_bugs_fire_where_they_are_injected():
    maze = BlockMaze(maze_seed=0)
    for bug in maze.bugs:
        maze.reset(seed=0)
        x, y = bug.cell
        maze.pos = next((x - dx, y - dy) for dx, dy in ((0, -1), (0, 1), (1, 0), (-1, 0)) if not maze.blocks[y - dy, x - dx])
        step = next(a for a, (dx, dy) in enumerate(((0, -1), (0, 1), (1, 0), (-1, 0))) if (maze.pos[0] + dx, maze.pos[1] + dy) == bug.cell)
        frame_before = maze.render()
        _, _, terminated, _, info = maze.step(step)
        if bug.kind == "crash":
            assert terminated and info["crashed"]
        elif bug.kind == "logic":
            assert info["health"] < 0 and not terminated
        else:  # frozen: moves do nothing, the picture (clock included) stops changing
            frozen = maze.render()
            assert not np.array_equal(frozen, frame_before)
            maze.step((step + 1) % 4)
            assert np.array_equal(maze.render(), frozen)


def test_evaluate_plays_every_job_on_few_instances_in_order_and_deterministically():
    agents = [RandomAgent(RandomAgentConfig(num_actions=4)) for _ in range(2)]
    jobs = [EvalJob(p, e, seed=10 * p + e) for p in range(2) for e in range(3)]
    coverage = StateCoverageConfig(features={"position": 1.0})

    def play():
        envs = make_eval_envs(lambda: game_env(MAZE, None, {"max_steps": 30, "maze_seed": 1}), 2)
        try:
            return evaluate(agents, jobs, envs, FrameSpec.square(48), coverage)
        finally:
            envs.close()

    first, again = play(), play()
    assert [r.job for r in first] == jobs
    assert all(1 <= r.steps <= 30 for r in first)
    assert [r.actions for r in first] == [r.actions for r in again]
    assert len({tuple(r.actions) for r in first}) == len(jobs)  # each job its own episode
    assert all(len(r.states) >= 2 for r in first)
    scores = policy_scores(first, 2)
    assert scores[0, 0] == pytest.approx(np.mean([len(r.states) for r in first[:3]]))
    assert scores[1, 1] == pytest.approx(np.mean([r.reward for r in first[3:]]))


def test_a_population_improves_both_objectives_and_its_findings_replay(tmp_path):
    cfg = EvolutionConfig(game=MAZE, run_dir=str(tmp_path / "run"), population_size=4, generations=2, eval_episodes=2,
                          eval_steps=100, num_envs=4, frames=FrameSpec.square(48), ppo=replace(default_offspring_ppo(), total_timesteps=1024),
                          refine="all")
    evo = run_evolve(cfg, assertions=[ASSERT], stuck_steps=8, log=lambda _: None)
    # resume for one more generation: it continues from the checkpoint, not from scratch, refining
    # every offspring as the run began (a run from before `improved` became the default)
    evo = run_evolve(replace(cfg, generations=3, resume=True, refine="improved"), assertions=[ASSERT], stuck_steps=8,
                     log=lambda _: None)
    assert evo.cfg.refine == "all"
    rows = list(read_jsonl(tmp_path / "run" / "generations.jsonl"))
    assert [r["generation"] for r in rows] == [0, 1, 2, 3] and evo.generation == 3
    first, last = rows[0], rows[-1]
    assert last["best_exploration"] > first["best_exploration"]
    assert last["best_winning"] > first["best_winning"]
    assert last["states_covered"] > first["states_covered"]
    assert all(b["steps"] > a["steps"] for a, b in zip(rows, rows[1:]))
    assert "trained" in last["origins"]  # PPO-refined offspring survive selection

    findings = sorted((tmp_path / "run" / "findings").iterdir())
    kinds = {json.loads((f / "finding.json").read_text())["kind"] for f in findings}
    assert kinds == {"crash", "stuck", "assertion"}
    for folder in findings[:4]:
        result = replay_finding(folder)
        assert result.compared > 0 and result.identical == result.compared
    log = list(read_jsonl(tmp_path / "run" / "findings.jsonl"))
    assert len(log) >= len(findings) and sum(r["new"] for r in log) == len(findings)


def test_a_game_without_a_reward_is_refused_naming_the_option(tmp_path):
    with pytest.raises(UserError, match="--reward"):
        Evolution(EvolutionConfig(game="doom:park:5:24x24", run_dir=str(tmp_path)))
    with pytest.raises(UserError, match="--reward"):
        check_game_reward('window:"My Game"', None)
    with pytest.raises(UserError, match="--reward 'nowhere.py:score'"):
        check_game_reward("doom:park", "nowhere.py:score")
    check_game_reward(MAZE, None)  # a Gymnasium env brings its own


def test_a_reward_callable_replaces_the_games_reward(tmp_path):
    path = tmp_path / "reward.py"
    path.write_text("def east(frame, info):\n    return float(info['position'][0])\n")
    env = game_env(MAZE, f"{path}:east", {"max_steps": 5})
    env.reset(seed=0)
    _, reward, *_ , info = env.step(2)
    assert reward == float(info["position"][0]) and reward >= 1.0
    env.close()


def test_playtester_run_evolve_from_the_command_line(tmp_path, capsys):
    from playtester.cli import main

    out = tmp_path / "run"
    assert main(["run", "evolve", "--game", MAZE, "--population", "2", "--generations", "1", "--steps", "30",
                 "--envs", "2", "--assert", ASSERT, "--stuck-steps", "8", "--out", str(out)]) == 0
    rows = list(read_jsonl(out / "generations.jsonl"))
    assert [r["generation"] for r in rows] == [0, 1] and (out / "report.html").exists()
    assert main(["run", "evolve", "--game", "doom:park", "--out", str(tmp_path / "park")]) == 2
    assert "--reward" in capsys.readouterr().err and not (tmp_path / "park").exists()
    assert main(["run", "evolve", "--game", MAZE, "--out", str(out)]) == 2  # exists: not overwritten
    assert "--resume" in capsys.readouterr().err and len(list(read_jsonl(out / "generations.jsonl"))) == 2
    # `run evolve --resume` needs only the folder: its options come from its config.yaml, as every run's
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (saved["population"], saved["steps"], saved["num_envs"]) == (2, 30, 2) == (
        saved["evolution"]["population_size"], saved["evolution"]["eval_steps"], saved["evolution"]["num_envs"])
    assert "explorer" not in saved  # evolve is its own command, not an explorer
    # a config.yaml of earlier versions said `explorer: evolve`: it resumes all the same
    (out / "config.yaml").write_text(yaml.safe_dump({**saved, "explorer": "evolve"}, sort_keys=False))
    assert main(["run", "evolve", "--out", str(out), "--resume", "--generations", "2"]) == 0
    assert [r["generation"] for r in read_jsonl(out / "generations.jsonl")] == [0, 1, 2]
    # the tester's subcommands refuse it, naming `run evolve`, from --resume and from --config
    assert main(["run", "explore", "--out", str(out), "--resume"]) == 2
    assert "playtester run evolve --out" in capsys.readouterr().err
    assert main(["run", "explore", "--config", str(out / "config.yaml"), "--out", str(tmp_path / "x")]) == 2
    assert "explorer evolve: a population of explorers; use `playtester run evolve`" in capsys.readouterr().err
    assert main(["run", "evolve", "--out", str(out), "--resume", "--generations", "3", "--population", "3"]) == 2
    assert "population_size differs" in capsys.readouterr().err


def test_an_evolve_run_from_before_its_options_were_at_the_top_resumes_with_them(tmp_path):
    """Its config.yaml kept the options only in the `evolution` section, by `EvolutionConfig`'s names."""
    from dataclasses import asdict

    from playtester.commands.run import saved_options

    cfg = EvolutionConfig(game=MAZE, run_dir=str(tmp_path), population_size=3, generations=4, eval_steps=25, num_envs=1, seed=7)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"game": MAZE, "agent": "evolve explorer", "explorer": "evolve",
                                                          "assertions": [], "stuck_steps": 8, "evolution": asdict(cfg)}))
    saved = saved_options(tmp_path)
    assert {k: saved[k] for k in ("reward", "population", "generations", "steps", "num_envs", "seed", "stuck_steps")} == {
        "reward": None, "population": 3, "generations": 4, "steps": 25, "num_envs": 1, "seed": 7, "stuck_steps": 8}


@pytest.mark.parametrize("refine", ["improved", "all"])
def test_ppo_refines_only_the_offspring_that_beat_their_parent(tmp_path, monkeypatch, refine):
    import copy

    from playtester.evolution.population import Member

    cfg = EvolutionConfig(game=MAZE, run_dir=str(tmp_path), population_size=4, generations=2, eval_episodes=1, eval_steps=20,
                          num_envs=2, frames=FrameSpec.square(48), refine=refine)
    evo = Evolution(cfg, log=lambda _: None)
    refined = []
    monkeypatch.setattr(evo, "refine", lambda agent, index: refined.append(index) or copy.deepcopy(agent))
    evo.population = [Member(evo.new_agent(i), "initial", 0) for i in range(4)]
    for m in evo.population:  # parents no offspring can beat: ever more states, ever higher rewards
        m.scores = np.array([1e6, 1e6])
    evo.generation = 1
    evo.step_generation()
    assert len(refined) == (4 if refine == "all" else 0)
    for m in evo.population:  # parents every offspring beats: it covers a state and scores above −1e6
        m.scores = np.array([0.0, -1e6])
    refined.clear()
    evo.generation = 2
    evo.step_generation()
    assert len(refined) == 4
    assert "trained" in [m.origin for m in evo.population] and all(m.parent is None for m in evo.population)
    with pytest.raises(ValueError, match="refine='some': use 'improved' or 'all'"):
        replace(cfg, refine="some")
