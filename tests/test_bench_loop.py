"""scripts/bench_loop.py's side-by-side machinery: a tree run from a site folder imports that tree."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_loop  # noqa: E402


def test_a_site_folder_imports_its_own_tree_not_the_editable_install(tmp_path):
    site = bench_loop.site_folder(bench_loop.ROOT, tmp_path / "site")
    assert Path(bench_loop.imported(site)) == site / "playtester" / "__init__.py"
    # every mapped area sits where it is installed, package data too
    assert (site / "playtester" / "capture" / "frames.py").resolve() == bench_loop.ROOT / "capture" / "frames.py"
    assert (site / "playtester" / "tester" / "loop.py").is_file()
    assert list((site / "playtester" / "capture" / "keymaps").glob("*.yaml"))
    assert bench_loop.run_words(site) == ["run", "explore"]


def test_a_tree_from_before_the_run_subcommands_runs_the_one_command_form(tmp_path):
    (tmp_path / "playtester" / "commands").mkdir(parents=True)
    assert bench_loop.run_words(tmp_path) == ["run"]


def test_step_costs_give_each_instance_time_to_the_kind_of_the_row_it_led_to():
    def row(env, mode):
        return {"env": env, "mode": mode}

    timed = [(0.0, row(0, "explore")), (0.0, row(1, "explore")),
             (0.1, row(0, "explore")),                         # env 0: 100 ms to an explorer step
             (0.3, row(0, "test")), (0.3, row(1, "explore")),  # env 0: 200 ms to a test step; env 1: 300 ms explore
             (0.32, row(0, "test")), (0.34, row(0, "test")),   # 20 ms each
             (0.34, row(0, "test"))]                           # seen at the same look: none of the gap
    costs = bench_loop.step_costs(timed)
    # explorer steps: 100 + 300 ms over 2; test steps: 200 + 20 + 20 + 0 ms over 4
    assert abs(costs["explore_ms"] - 200.0) < 1e-9 and abs(costs["test_ms"] - 60.0) < 1e-9
    assert costs["explore_share"] == 2 / 6
    # 2 instances, half the steps each kind: (200 + 60) / 2 = 130 ms a step an instance, 2000 / 130 steps/s
    assert abs(bench_loop.mixed_sps(costs, 2, 0.5) - 2000 / 130) < 1e-9
    assert abs(bench_loop.mixed_sps(costs, 1, 1.0) - 5.0) < 1e-9


def test_the_tail_reads_only_whole_new_rows_each_look(tmp_path):
    path = tmp_path / "trajectory.jsonl"
    tail = bench_loop.TrajectoryTail(path)
    tail.poll(0.0)  # no file yet
    path.write_bytes(b'{"env": 0, "mode": "explore"}\n{"env": 1, "mo')
    tail.poll(1.0)
    with path.open("ab") as f:
        f.write(b'de": "test"}\n{"env": 0, "mode": "test"}\n')
    tail.poll(2.0)
    tail.poll(3.0)
    assert [(t, r["env"], r["mode"]) for t, r in tail.rows] == [(1.0, 0, "explore"), (2.0, 1, "test"), (2.0, 0, "test")]


def test_the_memory_of_a_process_tree_counts_its_children():
    """A child that holds 150 MB: the tree's memory from this process includes it, and the child's
    own memory is at least that."""
    import os
    import subprocess
    import sys
    import time

    import bench_loop

    before = bench_loop.tree_memory_mb(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; b = b'x' * (150 << 20); print(1, flush=True); time.sleep(30)"],
                             stdout=subprocess.PIPE)
    try:
        child.stdout.readline()  # allocated
        time.sleep(0.2)
        assert bench_loop.tree_memory_mb(child.pid) >= 150
        assert bench_loop.tree_memory_mb(os.getpid()) >= before + 140
    finally:
        child.kill()
        child.wait()
