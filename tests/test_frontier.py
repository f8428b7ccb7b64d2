"""Returning to the frontier (`returns`, `playtester/tester/frontier.py`): the archive's ways and odds
by hand, a run whose episodes return on the small park, and a crash on a replayed step."""

import json

import gymnasium as gym
import numpy as np
import pytest
import yaml

from playtester.cli import main
from playtester.errors import UserError
from playtester.tester.frontier import FrontierArchive
from playtester.tester.runlog import read_jsonl


def view(i: int) -> np.ndarray:
    """Frames the pixel embedding tells apart: a bright block in a different cell of a dark screen."""
    frame = np.full((48, 64, 3), 20, np.uint8)
    row, col = divmod(i, 4)
    frame[row * 16:(row + 1) * 16, col * 16:(col + 1) * 16] = 230
    return frame


def test_the_archive_keeps_the_shortest_way_and_weighs_places_by_how_rarely_seen():
    archive = FrontierArchive(max_steps=10, max_share=0.5)
    a, b, c, d = (view(i) for i in range(4))
    first = []
    archive.begin(0, {"seed": 7, "options": None}, first)
    for steps, frame in enumerate([a, b, b, c, b, a, d]):  # the start, then six steps
        if steps:
            first.append(10 + steps)
        archive.observe(frame, steps)
    pa, pb, pc, pd = (archive.places.nearest(archive.embed(f))[0] for f in (a, b, c, d))
    assert len({pa, pb, pc, pd}) == 4
    # the start (0 steps) is not a way; d was first seen after 6 steps, beyond half the episode's 10
    # b seen 3 times, c once: weights 1/√3 and 1
    odds = archive.odds()
    assert set(odds) == {pb, pc}
    assert odds[pc] == pytest.approx(1 / (1 + 1 / np.sqrt(3)))
    # a second episode sees c after 2 steps: its way is now that one, and c was seen twice
    second = []
    archive.begin(3, {"seed": 9, "options": None}, second)
    archive.observe(a, 0)
    for steps, frame in [(1, a), (2, c)]:
        second.append(20 + steps)
        archive.observe(frame, steps)
    assert archive.odds()[pc] == pytest.approx((1 / np.sqrt(2)) / (1 / np.sqrt(2) + 1 / np.sqrt(3)))

    class Always:
        def choice(self, n, p):
            return list(archive.odds()).index(pc)

    way = archive.choose(Always())
    assert (way.place, way.episode, way.reset["seed"], way.actions) == (pc, 3, 9, (21, 22))
    # chosen once: its weight is divided by √2
    assert archive.odds()[pc] == pytest.approx((1 / 2) / (1 / 2 + 1 / np.sqrt(3)))
    assert archive.arrived(way, c) and not archive.arrived(way, a) and not archive.arrived(way, c, ended=True)
    assert (archive.returned, archive.missed) == (3, 2)


def test_no_place_to_return_to_before_a_step_was_played():
    archive = FrontierArchive(max_steps=10)
    archive.begin(0, {"seed": 1, "options": None}, [])
    archive.observe(view(0), 0)
    assert archive.choose(np.random.default_rng(0)) is None
    with pytest.raises(ValueError, match="max_share"):
        FrontierArchive(max_steps=10, max_share=0)


def test_a_run_whose_episodes_return_replays_the_way_and_explores_from_there(tiny_inspect_policy, small_park, tmp_path, capsys):
    """Random play on the small park with `returns: 1` (tests of the engine's labels on the way,
    so that a way holds test steps too): every episode after the first starts where an earlier one
    had been after the way's steps, on the very same frame, and plays the rest of its steps from there."""
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"returns": 1.0}))
    out = tmp_path / "r"
    steps = 60
    assert main(["run", "explore", "--game", small_park, "--explorer", "random", "--tester", str(tiny_inspect_policy),
                 "--oracle-labels", "--test-steps", "8", "--episodes", "3", "--steps", str(steps), "--config", str(config),
                 "--out", str(out)]) == 0, capsys.readouterr().err
    assert yaml.safe_load((out / "config.yaml").read_text())["returns"] == 1.0
    returns = list(read_jsonl(out / "returns.jsonl"))
    assert [r["episode"] for r in returns] == [1, 2] and all(r["reached"] for r in returns), returns
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    for r in returns:
        mine = [row for row in rows if row["episode"] == r["episode"]]
        earlier = [row for row in rows if row["episode"] == r["from_episode"]]
        way = mine[:r["steps"]]
        assert 1 <= r["steps"] <= steps // 2
        assert {row["mode"] for row in way} == {"return"} and "return" not in {row["mode"] for row in mine[r["steps"]:]}
        assert [(row["action"], row["position"]) for row in way] == [(row["action"], row["position"]) for row in earlier[:r["steps"]]]
        assert len(mine) == steps, "the way's steps are the episode's own"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 * steps


def test_a_window_game_cannot_return(tmp_path):
    from playtester.tester.spec import RunSpec

    with pytest.raises(UserError, match="returns 0.5: a window game plays in real time"):
        RunSpec(game="window:Some Game", run_dir=str(tmp_path / "w"), explorer="random", returns=0.5)


class CrashesAt(gym.Wrapper):
    """Says the game crashed on its `at`-th step of the run (the engine itself plays on)."""

    def __init__(self, env, at: int):
        super().__init__(env)
        self.at, self.steps = at, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            info = {**info, "crashed": True, "crash_reason": "gone while the way was replayed"}
        return obs, reward, terminated, truncated, info


def test_a_crash_on_a_replayed_step_is_a_finding_and_the_other_oracles_leave_the_way_alone(small_park, tmp_path):
    """An episode that returns replays its way below the explorer: the crash oracle still judges
    those steps (a crash can come at any step), the others do not (they judged them when first
    played). The game says it crashed on the first replayed step: that is a crash finding of the
    returning episode, at its step 0, and the other oracle was never asked about it."""
    from playtester.bugs.oracles import AssertionOracle, CrashOracle
    from playtester.capture.games import make_game
    from playtester.tester.loop import NoDetector, TesterConfig, TesterEnv

    judged = []

    def judge(frame, info):
        judged.append(info["step"])
        return True

    steps = 20
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(f"game: {small_park}\n")
    env = TesterEnv(CrashesAt(make_game(small_park, max_steps=steps), steps + 1), tester=None, detector=NoDetector(),
                    oracles=[CrashOracle(), AssertionOracle([("judge", judge)])], run_dir=run, game=small_park,
                    game_options={"max_steps": steps}, config=TesterConfig(returns=1.0, seed=1))
    rng = np.random.default_rng(0)
    for episode in range(2):
        env.reset(seed=100) if episode == 0 else env.reset()  # an episode returns only when the seed is the loop's to pick
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            if terminated or truncated:
                break
    env.close()
    rows = list(read_jsonl(run / "trajectory.jsonl"))
    assert [r["mode"] for r in rows if r["episode"] == 1] == ["return"], "the episode ended on its first, replayed, step"
    findings = [json.loads(p.read_text()) for p in sorted((run / "findings").glob("*/finding.json"))]
    assert [(f["kind"], f["episode"], f["step"]) for f in findings] == [("crash", 1, 0)]
    assert judged == list(range(1, steps + 1)), "the other oracle judged episode 0's steps and none of the way's"
