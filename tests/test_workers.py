"""A pool's workers end when the process that started them is killed (`playtester/workers.py`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

PARENT = textwrap.dedent("""
    import multiprocessing, os, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from playtester.workers import process_pool

    def mark(value):
        os.environ["MARKED"] = value

    def job(path):
        with open(path + ".partial", "w") as f:
            f.write(f"{os.getpid()} {os.environ.get('MARKED', 'unmarked')}")
        os.rename(path + ".partial", path)
        time.sleep(60)  # a long job, still running when its parent is killed

    if __name__ == "__main__":
        if sys.argv[2] == "watch":  # the pool the benchmarks use, with an initializer of their own
            pool = process_pool(1, mark, ("marked",))
        else:
            pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        with pool:
            pool.submit(job, sys.argv[1]).result()
""")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone but for its parent's wait
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def worker_after_parent_killed(tmp_path: Path, mode: str) -> bool:
    """Start a parent whose one worker runs a long job, kill the parent, and say whether the worker
    is still alive 5 s later (it is killed here either way)."""
    script, pid_file = tmp_path / "parent.py", tmp_path / f"worker-{mode}"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(pid_file), mode])
    deadline = time.monotonic() + 60
    while not pid_file.exists():
        assert time.monotonic() < deadline and parent.poll() is None, "the worker never started its job"
        time.sleep(0.1)
    pid, marked = pid_file.read_text().split()
    worker = int(pid)
    assert marked == ("marked" if mode == "watch" else "unmarked"), "the pool's own initializer runs too"
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    survived = alive(worker)
    if survived:
        os.kill(worker, signal.SIGKILL)
    return survived


def test_a_watched_worker_ends_with_its_killed_parent_and_an_unwatched_one_does_not(tmp_path):
    assert not worker_after_parent_killed(tmp_path, "watch")
    assert worker_after_parent_killed(tmp_path, "none"), "without the watch the orphan runs on (what the watch is for)"
