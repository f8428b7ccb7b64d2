"""`BackgroundJob`: one piece of work at a time in a thread of its own, waited for where its
result is needed.

The explorer's two pieces of work that need not stop the games run this way: PPO's update of
a rollout (with the rollout's rewards and advantages, `ppo.Updates`), while the games play the
next rollout, and RND's predictor training (`ExplorationReward`), until the next rollout's
rewards need the predictors. The job runs on the torch thread count of the thread that started it
(a thread's count is its own: the games' side keeps theirs); an error in it is raised where it is
waited for.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import torch


class BackgroundJob:
    """One job at a time, named `name` (the thread's name); `start` it, `wait` for its result."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._outcome: list[tuple[bool, Any]] = []

    @property
    def running(self) -> bool:
        """Started and not waited for yet (it may have finished)."""
        return self._thread is not None

    def start(self, work: Callable[..., Any], *args: Any) -> None:
        """Run `work(*args)` in the job's thread; refused while the last job is not waited for."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name}: the last job is not waited for")
        threads = torch.get_num_threads()

        def run() -> None:
            try:
                # A thread's first torch call takes the count last set by any thread (torch's lazy
                # per-thread set-up), which would undo ours: have it now, then set ours.
                torch.get_num_threads()
                torch.set_num_threads(threads)
                self._outcome.append((True, work(*args)))
            except BaseException as e:  # handed to the thread that waits for it
                self._outcome.append((False, e))

        self._thread = threading.Thread(target=run, name=self.name)
        self._thread.start()

    def wait(self) -> Any:
        """The result of the job started last, once it has finished (its error raised here); None
        at once when none is running."""
        thread, self._thread = self._thread, None
        if thread is None:
            return None
        thread.join()
        ok, value = self._outcome.pop()
        if not ok:
            raise value
        return value
