"""Engines that die with their parent, and Ctrl-C told apart from a game's death.

ViZDoom starts its engine itself: a thread of its C++ library forks and execs the `vizdoom`
binary, so no parent-death signal (`prctl(PR_SET_PDEATHSIG)`) can be set on it from here, and
a parent killed with SIGKILL leaves the engine running under PID 1 (it ignores SIGTERM) with
about 11 MB of shared memory in /dev/shm (`ViZDoomSM<id>`, `ViZDoomMQCtr<id>`,
`ViZDoomMQDoom<id>`, `<id>` being the engine's `+viz_instance_id`).

`EngineWatchdog`: one small process per parent that starts engines (`python -S`, a few MB),
in a session of its own so that Ctrl-C does not reach it. The parent writes each engine's pid
and instance id down a pipe; when the pipe closes (the parent is gone, however it went), the
watchdog SIGKILLs the engines it was told of that still run (checked by instance id in their
command line, so a reused pid is left alone) and removes their shared memory. An engine closed
normally is crossed off first. A game the harness launched itself (`--launch`, see
`capture/window/launch.py`) runs in a process group of its own; the watchdog is told its group
(`watch_group`) and SIGKILLs the whole group when the parent dies. A window game's key sender
tells it the keys it may press (`release_on_exit`), which it releases on the parent's X display
then, through python-xlib's XTest (the only import it makes, and only then).

`die_with_parent()`: the parent-death signal for processes this package starts itself (the
explorer's game workers), so that they, and through their watchdogs their engines, go when
the run's process goes.

`interrupted_recently()`: Ctrl-C sends SIGINT to the whole foreground process group, engine
included, and the engine dies of it; a parent that sees its engine die checks this before
calling it a crash. `leave_interrupts_to_parent()`: a game worker notes Ctrl-C and leaves the
ending of the run to the run's own process.
"""

from __future__ import annotations

import ctypes
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

SHM_PREFIXES = ("ViZDoomSM", "ViZDoomMQCtr", "ViZDoomMQDoom")
"""The engine's shared-memory segments in /dev/shm, each followed by its instance id."""

SHM_DIR = Path("/dev/shm")

_WATCHDOG_SOURCE = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
prefixes, shm = sys.argv[1].split(","), sys.argv[2]
engines, groups, keys = {}, set(), {}
for line in sys.stdin:
    op, pid, iid = line.split()
    if op == "+":
        engines[int(pid)] = iid
    elif op == "-":
        engines.pop(int(pid), None)
    elif op == "G":
        groups.add(int(pid))
    elif op == "g":
        groups.discard(int(pid))
    elif op == "K":
        keys.setdefault(pid, set()).update(iid.split(","))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
if keys and len(sys.argv) > 3 and sys.argv[3]:
    sys.path.insert(0, sys.argv[3])
    try:
        from Xlib import X, XK, display
        from Xlib.ext import xtest
    except Exception:
        keys = {}
    for name, syms in keys.items():
        try:
            d = display.Display(name)
            for sym in syms:
                code = d.keysym_to_keycode(XK.string_to_keysym(sym))
                if code:
                    xtest.fake_input(d, X.KeyRelease, code)
            d.sync()
            d.close()
        except Exception:
            pass
for pid, iid in engines.items():
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            ours = iid.encode() in f.read()
        if ours:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    for prefix in prefixes:
        try:
            os.unlink(os.path.join(shm, prefix + iid))
        except OSError:
            pass
"""


class EngineWatchdog:
    """The watchdog process of this process's engines; see the module doc. One per process:
    `EngineWatchdog.here()`."""

    _instance: "EngineWatchdog | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        import importlib.util

        self.owner = os.getpid()
        xlib = importlib.util.find_spec("Xlib")  # where python-xlib lives, to let go of keys (not imported here)
        xlib_dir = str(Path(xlib.submodule_search_locations[0]).parent) if xlib and xlib.submodule_search_locations else ""
        self.process = subprocess.Popen(
            [sys.executable, "-S", "-c", _WATCHDOG_SOURCE, ",".join(SHM_PREFIXES), str(SHM_DIR), xlib_dir],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )

    @classmethod
    def here(cls) -> "EngineWatchdog":
        """This process's watchdog, started on first use (a forked child starts its own)."""
        with cls._lock:
            if cls._instance is None or cls._instance.owner != os.getpid():
                cls._instance = cls()
            return cls._instance

    def _send(self, line: str) -> None:
        try:
            self.process.stdin.write(line.encode() + b"\n")  # type: ignore[union-attr]
            self.process.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, ValueError, OSError):
            pass  # a watchdog that died cannot guard; the engine still closes with its parent normally

    def watch(self, pid: int, instance_id: str) -> None:
        self._send(f"+ {pid} {instance_id}")

    def forget(self, pid: int, instance_id: str) -> None:
        self._send(f"- {pid} {instance_id}")

    def watch_group(self, pgid: int) -> None:
        """Kill process group `pgid` (a launched game and its children) when the parent dies."""
        self._send(f"G {pgid} -")

    def forget_group(self, pgid: int) -> None:
        self._send(f"g {pgid} -")

    def release_on_exit(self, display: str, keysyms: list[str]) -> None:
        """Send X key releases of these keysyms to `display` when the parent dies: a key it held
        down would otherwise stay down (XTest keeps a dead client's keys pressed)."""
        if keysyms and display and " " not in display:
            self._send(f"K {display} {','.join(keysyms)}")


def _close_inherited_watchdog() -> None:
    """In a forked child: let go of the parent's pipe, or the parent's death would go unseen
    while the child lives."""
    watchdog = EngineWatchdog._instance
    if watchdog is not None and watchdog.process.stdin is not None:
        try:
            watchdog.process.stdin.close()
        except OSError:
            pass
        EngineWatchdog._instance = None
    EngineWatchdog._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_watchdog)


def process_tree(root: int) -> list[int]:
    """`root` and every process under it (Linux: read from /proc), `root` first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def engine_pids() -> dict[int, str]:
    """This process's running ViZDoom engines (children of any of its threads): pid → instance id."""
    children: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            children.update(int(p) for p in task.read_text().split())
        except OSError:
            continue
    engines = {}
    for pid in children:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"+viz_instance_id" in argv and argv.index(b"+viz_instance_id") + 1 < len(argv):
            engines[pid] = argv[argv.index(b"+viz_instance_id") + 1].decode()
    return engines


def remove_shared_memory(instance_id: str) -> None:
    """Delete a dead engine's segments (the library removes them on a normal close)."""
    for prefix in SHM_PREFIXES:
        (SHM_DIR / f"{prefix}{instance_id}").unlink(missing_ok=True)


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send `sig` to this process when its parent exits (elsewhere: nothing)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)
    if os.getppid() != parent:  # the parent went before the signal was set
        os.kill(os.getpid(), sig)


_last_interrupt = [0.0]
_watching = [False]
_parent_handles = [False]


def watch_interrupts() -> None:
    """Note the time of every SIGINT this process gets, then handle it as before. Only the
    main thread may set a handler; elsewhere, and when done already, nothing."""
    if _watching[0] or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)

    def note(signum, frame):
        _last_interrupt[0] = time.monotonic()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:  # the default, or a handler not set from Python
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, note)
    _watching[0] = True


def leave_interrupts_to_parent() -> None:
    """For worker processes of a run: a Ctrl-C reaches the whole process group, and the run's
    own process ends the run and closes its workers. Here it is only noted (so that an engine
    killed by it is not called a crash), never raised: a KeyboardInterrupt in a worker's step
    came back to the run as a worker error with its traceback."""
    def note(signum, frame):
        _last_interrupt[0] = time.monotonic()

    signal.signal(signal.SIGINT, note)
    _watching[0] = _parent_handles[0] = True


def parent_handles_interrupts() -> bool:
    """Whether this process is a worker that leaves Ctrl-C to the process that started it."""
    return _parent_handles[0]


def interrupted_recently(within: float = 2.0, settle: float = 0.2) -> bool:
    """Whether a SIGINT came in the last `within` seconds. Waits `settle` seconds first, so that
    a Ctrl-C on its way to this process arrives (and raises KeyboardInterrupt here, as usual)."""
    time.sleep(settle)
    return time.monotonic() - _last_interrupt[0] < within


# -- a library stuck on a dead engine's lock --------------------------------------------------

MQ_MUTEX_OFFSET = 0x30
"""Where the lock of a ViZDoom message queue lies in its /dev/shm segment (the boost
message-queue header of ViZDoom 1.3: a process-shared pthread mutex)."""

_futex_syscall = {"x86_64": 202, "aarch64": 98}.get(os.uname().machine)
"""The futex system call's number (Linux), to wake the waiters of a released lock."""


def engine_alive(pid: int) -> bool:
    """The process runs (not gone, not a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def release_dead_locks(instance_id: str) -> int:
    """Unlock the message-queue locks a dead engine held, and wake whoever waits on them.

    An engine killed while it holds the lock of one of its message queues leaves the library's
    threads here waiting for that lock for ever (the lock is not robust). The lock word lives in
    the queue's shared memory, mapped in this process; a lock whose owner is no thread of this
    process can only be the dead engine's. Returns how many locks were released."""
    import mmap

    if _futex_syscall is None:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    released = 0
    for prefix in ("ViZDoomMQCtr", "ViZDoomMQDoom"):
        path = SHM_DIR / f"{prefix}{instance_id}"
        try:
            with open(path, "r+b") as f:
                view = mmap.mmap(f.fileno(), 0)
        except (OSError, ValueError):
            continue
        try:
            lock, _, owner = struct.unpack_from("iii", view, MQ_MUTEX_OFFSET)
            if lock == 0 or (owner and Path(f"/proc/self/task/{owner}").exists()):
                continue
            struct.pack_into("iii", view, MQ_MUTEX_OFFSET, 0, 0, 0)  # __lock, __count, __owner
            word = ctypes.c_int32.from_buffer(view, MQ_MUTEX_OFFSET)
            libc.syscall(_futex_syscall, ctypes.byref(word), 1, 2**31 - 1, None, None, 0)  # FUTEX_WAKE (shared)
            del word
            released += 1
        finally:
            view.close()
    return released


class StallGuard:
    """Watches the engine while the library talks to it; when the engine has died and a call
    has not come back within `grace` seconds, releases the locks it held (`release_dead_locks`),
    so that the call raises as for any engine death instead of hanging."""

    def __init__(self, grace: float = 2.0, every: float = 0.5) -> None:
        self.grace, self.every = grace, every
        self.engine: tuple[int, str] | None = None
        self.since: float | None = None
        self.releases = 0
        self._closed = threading.Event()
        threading.Thread(target=self._watch, name="engine-stall-guard", daemon=True).start()

    def call(self) -> "_GuardedCall":
        return _GuardedCall(self)

    def _watch(self) -> None:
        while not self._closed.wait(self.every):
            since, engine = self.since, self.engine
            if since is None or engine is None or time.monotonic() - since < self.grace:
                continue
            if not engine_alive(engine[0]):
                self.releases += release_dead_locks(engine[1])

    def close(self) -> None:
        self._closed.set()


class _GuardedCall:
    def __init__(self, guard: StallGuard) -> None:
        self.guard = guard

    def __enter__(self) -> None:
        self.guard.since = time.monotonic()

    def __exit__(self, *exc) -> None:
        self.guard.since = None
