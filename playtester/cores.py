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
beside it (docs/benchmarks/ppo-and-loop.md, "Sharing the cores").
"""

from __future__ import annotations

import os

THREADS_VARIABLE = "PLAYTESTER_THREADS"
"""The cores given to the command (`--threads`), inherited by the processes it starts."""

THREADS_HELP = ("CPU cores this command may use, shared among the processes it starts (game workers, model server, "
                "trainer); 0: this machine's. Give fewer on a machine that runs other work: each process then "
                "runs as many torch threads as its share, instead of every core each.")


def wait_quietly() -> None:
    """Make idle OpenMP threads sleep instead of spinning, in this process and every process it
    starts; before torch is loaded (the command line calls it first). A setting of the user's own
    is kept."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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
