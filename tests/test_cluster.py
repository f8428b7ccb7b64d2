"""`--cluster ray`: the game instances as Ray actors on a local Ray (`num_cpus=2`, started once for
the module), the real ViZDoom engine on the small park. A run there ends with the same kinds of
files and records as a local one; an actor killed mid-run loses no written record, its game goes
on in a new actor and the run ends with its report; `demos` by Ray tasks records the same
episodes; bad `--cluster` values are one line (issue 22)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from test_crash_restart import engines_under, process_tree

from playtester.capture.engine_guard import engine_alive
from playtester.cli import main
from playtester.tester.runlog import read_jsonl


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def ray_processes() -> list[int]:
    """Processes of a Ray started by this one: its workers and actors (`ray::…`), raylet, GCS."""
    found = []
    for pid in process_tree(os.getpid())[1:]:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if (argv.startswith(b"ray::") or b"raylet" in argv or b"gcs_server" in argv) and engine_alive(pid):
            found.append(pid)
    return found


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module (the run command finds it started and leaves it running)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
    deadline = time.time() + 10
    while ray_processes() and time.time() < deadline:  # what shutdown ended may take a moment to be reaped
        time.sleep(0.2)
    assert not ray_processes(), "Ray processes left after ray.shutdown()"


def files_of(run: Path) -> set[str]:
    """A run folder's files, by path inside it (the explorer's TensorBoard events by kind)."""
    return {("explorer/tensorboard/events" if "tfevents" in p.name else str(p.relative_to(run)))
            for p in run.rglob("*") if p.is_file()}


def keys_of(path: Path) -> set[str]:
    return set().union(*(set(r) for r in read_jsonl(path)))


def sorted_steps(run: Path) -> list[str]:
    """A run's trajectory records without what varies from one run to the next (frame times, node)."""
    return sorted(json.dumps({k: v for k, v in r.items() if k not in ("frame_time_ms", "node")}, sort_keys=True)
                  for r in read_jsonl(run / "trajectory.jsonl"))


ASSERTION = """
calls = 0

def every_tenth_step_fails(frame, info):
    global calls
    calls += 1
    return calls % 10 != 0
"""


def test_a_run_on_ray_writes_what_a_local_run_writes(local_ray, small_park, tmp_path, capsys, monkeypatch, run_config):
    check = tmp_path / "check.py"
    check.write_text(ASSERTION)  # findings from each instance (the file goes to the actors through Ray)
    args = ["run", "explore", "--game", small_park, "--explorer", "inspector", "--envs", "2", "--episodes", "3", "--steps", "20",
            *run_config(rollout=8, assertions=[f"{check}:every_tenth_step_fails"])]
    # in lockstep both (running free, which instance answers first draws the next action first)
    import playtester.exploration.ppo as ppo

    with monkeypatch.context() as patch:
        patch.setattr(ppo, "free_running", lambda cfg, envs: False)
        assert main([*args, "--out", str(tmp_path / "local")]) == 0
        assert main([*args, "--out", str(tmp_path / "ray"), "--cluster", "ray"]) == 0
    assert "report" in capsys.readouterr().out
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    assert files_of(on_ray) == files_of(local)  # findings/e1-0000/clip.mp4 and all
    assert len(list((on_ray / "findings").iterdir())) == 6  # 40 steps of instance 0, 20 of instance 1
    assert json.loads((on_ray / "summary.json").read_text()).keys() == json.loads((local / "summary.json").read_text()).keys()
    rows = list(read_jsonl(on_ray / "trajectory.jsonl"))
    assert keys_of(on_ray / "trajectory.jsonl") - {"node"} == keys_of(local / "trajectory.jsonl")
    # the same seeds, the same games, the same explorer on the driver: the same steps, whatever ran the games
    assert sorted_steps(on_ray) == sorted_steps(local)
    assert all(r["node"] == local_ray.get_runtime_context().get_node_id() for r in rows if "frame_time_ms" in r)
    assert {r["episode"] for r in rows} == {0, 1, 2} and all(r["episode"] % 2 == r["env"] for r in rows)
    for e in range(3):
        assert [r["t"] for r in rows if r["episode"] == e] == list(range(20)), f"episode {e} is not whole"
    # findings (the stuck oracle's, from the actors' scratch folders) arrive whole, numbered per instance
    for folder in (on_ray / "findings").iterdir():
        finding = json.loads((folder / "finding.json").read_text())
        assert folder.name.startswith("e1-") == (finding["episode"] % 2 == 1)
        assert finding["step"] % 10 == 9 or finding["episode"] == 2  # instance 0 counts on across its episodes
    assert main(["run", "explore", "--game", small_park, "--explorer", "random", "--episodes", "2", "--steps", "10",
                 "--out", str(tmp_path / "random"), "--cluster", "ray"]) == 0
    assert [r["t"] for r in read_jsonl(tmp_path / "random" / "trajectory.jsonl")] == list(range(10)) * 2


@pytest.mark.slow
def test_a_run_with_no_map_on_ray_keeps_its_places(local_ray, tmp_path, capsys):
    """A game with no map (Mountain Car): the places the actor found, thumbnails and all, reach the
    run folder, and a resumed run's new actor goes on from its places (the ids go on; a view it
    knew is its old place, not a new one)."""
    args = ["run", "explore", "--game", "gym:MountainCar-v0", "--explorer", "random", "--steps", "30"]
    on_ray = tmp_path / "ray"
    assert main([*args, "--episodes", "1", "--out", str(on_ray), "--cluster", "ray"]) == 0
    before = list(read_jsonl(on_ray / "places.jsonl"))
    assert len(before) > 1 and {f for f in files_of(on_ray) if f.startswith("places/")} == {r["thumb"] for r in before}
    assert main([*args, "--episodes", "3", "--out", str(on_ray), "--cluster", "ray", "--resume"]) == 0
    records = list(read_jsonl(on_ray / "places.jsonl"))
    assert records[:len(before)] == before and [r["place"] for r in records] == list(range(len(records)))
    assert all((on_ray / r["thumb"]).is_file() for r in records)
    rows = list(read_jsonl(on_ray / "trajectory.jsonl"))
    assert {r["place"] for r in rows} == set(range(len(records)))
    assert any(r["place"] < len(before) for r in rows if r["episode"] > 0), "views of the first episode known again"


def test_a_killed_actor_loses_no_record_and_the_run_ends_with_its_report(local_ray, small_park, tiny_inspect_policy, tmp_path,
                                                                         monkeypatch, capsys, run_config):
    """With the tester loop on (OOI tests, claims shared between the actors through the driver)."""
    from playtester.exploration.ray_env import RayVectorEnv

    out = tmp_path / "killed"
    answer, seen = RayVectorEnv.answer, {}

    def answer_and_kill(self, i, result):  # at the 12th answer: SIGKILL instance 1's actor, as a lost node would
        seen["answers"] = seen.get("answers", 0) + 1
        if seen["answers"] == 12:
            seen["written"] = (out / "trajectory.jsonl").read_bytes()
            pid = self.worker_pids()[1]
            seen["engines"] = engines_under(pid)
            os.kill(pid, signal.SIGKILL)
        answered = answer(self, i, result)
        if isinstance(result, BaseException):
            seen["info"], seen["env"], seen["lost"] = answered[4], self, i
        return answered

    monkeypatch.setattr(RayVectorEnv, "answer", answer_and_kill)
    # the engine's labels need no confirmation: each is tested at once, so that 4 × 30 steps test some OOIs
    # (with 4 of 4, the tiny untrained test policy's look before a test often turns the OOI out of view)
    assert main(["run", "explore", "--game", small_park, "--tester", str(tiny_inspect_policy), "--oracle-labels", "--test-steps", "8",
                 "--explorer", "inspector", "--envs", "2", "--episodes", "4", "--steps", "30",
                 *run_config(rollout=8, confirm_hits=1, confirm_window=1), "--out", str(out), "--cluster", "ray"]) == 0
    assert "lost" in capsys.readouterr().out
    info = seen["info"]  # the step it died in ends its episode, truncated, and says so
    assert seen["lost"] == 1 and info["worker_lost"] and info["final_info"]["worker_lost"]
    assert seen["env"].lost == 1
    lost = json.loads((out / "findings" / "lost-e1-00" / "finding.json").read_text())  # the driver's finding of it
    assert lost["kind"] == "lost" and lost["details"]["env"] == 1 and lost["episode"] == 1
    # every record written before the kill is still there, as it was; the logs were only appended to
    assert (out / "trajectory.jsonl").read_bytes().startswith(seen["written"])
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    cut = [r["t"] for r in rows if r["episode"] == 1]
    assert cut == list(range(len(cut))) and 3 <= len(cut) < 30 and len(cut) == lost["steps"], \
        "instance 1's episode ends at the step its worker died in"
    assert {r["episode"] for r in rows} == {0, 1, 2, 3}  # its next episode in the new actor
    assert [r["t"] for r in rows if r["episode"] == 3] == list(range(30))
    tests, claims = list(read_jsonl(out / "tests.jsonl")), [c["ooi"] for c in read_jsonl(out / "claims.jsonl")]
    assert tests and sorted(claims) == sorted(t["ooi"] for t in tests) and len(set(claims)) == len(claims)
    assert not (out / "crashes.jsonl").exists() or not list(read_jsonl(out / "crashes.jsonl"))  # not a crash
    assert (out / "report.html").exists() and json.loads((out / "summary.json").read_text())["episodes"] == 4
    assert seen["engines"], "the killed actor ran no engine"
    time.sleep(0.5)  # its watchdog noticed at once; give the kill a moment
    assert not [pid for pid, iid in seen["engines"].items() if engine_alive(pid) and iid in cmdline(pid)], \
        "the killed actor's engine is left running"


def test_demos_recorded_by_ray_tasks_are_the_local_demos(local_ray, small_park, tmp_path, capsys):
    args = ["demos", "--game", small_park, "--behavior", "inspect", "--episodes", "3", "--steps", "20"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    assert main([*args, "--out", str(tmp_path / "ray"), "--cluster", "ray"]) == 0
    assert "Ray tasks" in capsys.readouterr().out
    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == names == ["ep0000", "ep0001", "ep0002"]
    for name in names:
        local, on_ray = tmp_path / "local" / name, tmp_path / "ray" / name
        for file in ("frames.npy", "steps.jsonl"):
            assert (on_ray / file).read_bytes() == (local / file).read_bytes(), f"{name}/{file}"
        meta = json.loads((on_ray / "meta.json").read_text())
        assert meta.keys() == json.loads((local / "meta.json").read_text()).keys() and meta["reset"]["seed"] == int(name[2:])


@pytest.mark.parametrize("value, words", [
    ("rai", ["--cluster rai:", "ray://HOST:PORT"]),
    ("ray://", ["--cluster ray://:", "ray://HOST:PORT"]),
])
def test_bad_cluster_values_are_one_line(small_park, tmp_path, capsys, value, words):
    out = tmp_path / "r"
    assert main(["run", "explore", "--game", small_park, "--explorer", "random", "--out", str(out), "--cluster", value]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and all(w in err for w in words) and not out.exists()


def test_cluster_without_ray_installed_says_how_to_install(small_park, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    assert main(["run", "explore", "--game", small_park, "--explorer", "inspector", "--out", str(tmp_path / "r"), "--cluster", "ray"]) == 2
    assert capsys.readouterr().err.strip() == 'error: --cluster ray: Ray is not installed; pip install -e ".[cluster]"'
