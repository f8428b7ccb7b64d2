"""The cores a command is given, and how the processes it starts share them.

Every command that computes takes `--threads N`: the cores it may use (default: this machine's,
as far as this process may run on them). The number travels to every process the command starts
in `PLAYTESTER_THREADS`, and each process sets torch's threads to its share (`share`): a training
stage is one process and takes them all; a tester run divides them among its game workers, its
model server and its trainer (`playtester/tester/runner.py`). Torch's own default is every core
in every process, which oversubscribes the cores as soon as two such processes run: with another
torch job beside it the demo's detector stage took 7× its quiet time, half of it in the kernel.

The other half of that cure is `wait_quietly`: OpenMP threads that wait for work sleep instead of
spinning (`OMP_WAIT_POLICY=PASSIVE`), so that a waiting thread gives its core to whatever runs
beside it. Sleeping has a price when nothing else runs: each of the many small parallel regions of
a training step then waits for its threads to wake, and the detector's training step took ×1.4
as long (343 against 240 ms on 2 quiet cores). So `train detector`, one process, first looks at
its cores (`spin_when_alone`): idle, its threads wait as OpenMP's default has them (spin a moment,
then sleep); busy with other work, they sleep (docs/benchmarks/detector.md, "Waiting threads").
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Optional

THREADS_VARIABLE = "PLAYTESTER_THREADS"
"""The cores given to the command (`--threads`), inherited by the processes it starts."""

THREADS_HELP = ("CPU cores this command may use, shared among the processes it starts (game workers, model server, "
                "trainer); 0: this machine's. Give fewer on a machine that runs other work: each process then "
                "runs as many torch threads as its share, instead of every core each.")


WAIT_POLICY_VARIABLE = "PLAYTESTER_WAIT_POLICY"
"""`set` where OMP_WAIT_POLICY is playtester's (`wait_quietly`), not the user's: inherited with it."""

BUSY_CORES = 0.5
"""Cores' worth of other work at a training stage's start above which its threads sleep."""


def wait_quietly() -> None:
    """Make idle OpenMP threads sleep instead of spinning, in this process and every process it
    starts; before torch is loaded (the command line calls it first). A setting of the user's own
    is kept."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        os.environ[WAIT_POLICY_VARIABLE] = "set"


def spin_when_alone(busy: Callable[[], Optional[float]] | None = None) -> bool:
    """For a command that is one busy process (a training stage), called before torch loads: when
    the cores it may run on have less than `BUSY_CORES` of other work on them now, undo
    `wait_quietly` so that OpenMP's idle threads spin a moment before they sleep (libgomp's default),
    which the many small parallel regions of a training step need to be quick. Kept sleeping when
    the cores are busy, when that cannot be read (`busy` gives None), when the user set
    OMP_WAIT_POLICY, and once torch has loaded (too late). Whether it was undone."""
    if os.environ.get(WAIT_POLICY_VARIABLE) != "set" or "torch" in sys.modules:
        return False
    others = (busy or busy_cores)()
    if others is None or others >= BUSY_CORES:
        return False
    del os.environ["OMP_WAIT_POLICY"], os.environ[WAIT_POLICY_VARIABLE]
    return True


def leave_to_others(threads: int, others: Optional[float]) -> int:
    """`--threads` for `train detector` (one busy process) whose cores carried `others` cores' worth
    of other work at its start (`busy_cores`): the cores given less that work (rounded), at least
    one, when it is `BUSY_CORES` or more; else `threads` as it was. A number the user gave is kept.
    Beside a job that keeps both cores of a 2-core machine busy, the detector's stage took 16.9 s
    this way against 19.8 s on two threads (11.0–11.2 s alone; 3 rounds side by side): its small
    parallel regions gain little from a second thread (12.6 against 13.1 s alone), and each waits
    for the other's turn on a busy core (docs/benchmarks/detector.md, "Beside another job")."""
    if threads or others is None or others < BUSY_CORES:
        return threads
    return max(1, cores() - int(round(others)))


def _cpu_times(cpus: set[int]) -> Optional[tuple[int, int]]:
    """(busy, all) clock ticks so far of the given CPUs, from /proc/stat (Linux); None elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    busy = total = 0
    for line in lines:
        name, *fields = line.split() or [""]
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus and len(fields) >= 8):
            continue
        ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
        total += sum(ticks)
        busy += sum(ticks) - ticks[3] - ticks[4]
    return (busy, total) if total else None


def busy_cores(seconds: float = 0.25) -> Optional[float]:
    """Cores' worth of work on the CPUs this process may run on, over the next `seconds` (this
    process sleeps meanwhile, so the work is others'); None where /proc/stat cannot tell."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    before = _cpu_times(cpus)
    time.sleep(seconds)
    after = _cpu_times(cpus)
    if before is None or after is None or after[1] <= before[1]:
        return None
    return len(cpus) * (after[0] - before[0]) / (after[1] - before[1])


def machine_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def cores() -> int:
    """The cores the command was given (`--threads`, in `PLAYTESTER_THREADS`; else a user's
    `OMP_NUM_THREADS`), else the machine's."""
    for variable in (THREADS_VARIABLE, "OMP_NUM_THREADS"):
        given = os.environ.get(variable, "")
        if given.isdigit() and int(given) > 0:
            return int(given)
    return machine_cores()


def give(threads: int) -> int:
    """`--threads`: give the command `threads` cores (0: keep what it was given, else the
    machine's), for this process and every process it starts; this process's torch threads set
    to them. The cores given."""
    if threads < 0:
        from playtester.errors import UserError

        raise UserError(f"--threads {threads}: the cores this command may use; give 1 or more, or 0 for this machine's")
    if threads:
        os.environ[THREADS_VARIABLE] = str(threads)
    given = cores()
    import torch

    torch.set_num_threads(given)
    return given


def share(processes: int) -> int:
    """Torch threads for one of `processes` busy processes that share the command's cores."""
    return max(1, cores() // max(1, processes))
