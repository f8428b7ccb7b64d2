"""Worker processes that do not outlive the process that started them.

A pool's spawned workers (`ProcessPoolExecutor`) hold the jobs already queued to them: when the
process that started them is killed (`kill PID`, not Ctrl-C, which reaches the whole process
group), they go on running those jobs, orphaned, writing into folders that a later run also
writes to. `exit_with_parent` ends a worker within a second of its parent's death;
`process_pool` is the pool whose workers all do.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

PARENT_POLL_S = 1.0
"""How often a worker looks whether its parent is still there."""


def exit_with_parent() -> None:
    """In a worker: a daemon thread that ends this process once its parent has gone (its parent
    process id changes when it is re-parented)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(70)  # no clean-up to run: the job's results have no one to go to

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def process_pool(workers: int, initializer: Callable[..., None] | None = None, initargs: tuple = ()) -> ProcessPoolExecutor:
    """A pool of `workers` spawned processes (torch's threads do not survive a fork) that end with
    the process that made it (`exit_with_parent`), each then running `initializer(*initargs)`."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
                               initargs=(initializer, initargs))


def _start_worker(initializer: Callable[..., None] | None, initargs: tuple) -> None:
    exit_with_parent()
    if initializer is not None:
        initializer(*initargs)
