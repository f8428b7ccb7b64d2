"""A fixed-rate schedule: wait for the next tick; say how many ticks were missed when late."""

from __future__ import annotations

import time


class Ticker:
    """Ticks every `1 / rate` seconds on a fixed grid from `restart()`."""

    def __init__(self, rate: float) -> None:
        self.period = 1.0 / float(rate)
        self.restart()

    def restart(self) -> None:
        """The next tick is one period from now."""
        self._next = time.perf_counter() + self.period

    def wait(self) -> int:
        """Sleep until the next tick; when already past it, return the ticks missed and realign."""
        now = time.perf_counter()
        if now < self._next:
            time.sleep(self._next - now)
            self._next += self.period
            return 0
        missed = int((now - self._next) / self.period)
        self._next += (missed + 1) * self.period
        return missed
