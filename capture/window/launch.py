"""A game the harness starts itself (`--launch COMMAND`), waits for, and ends with the run.

The command is split like a shell would (`shlex`; no shell runs it: `env VAR=value game …`
sets variables) and started in a process group of its own, so that Ctrl-C in the terminal
reaches playtester alone, which then ends the game, and so that the game's own children end
with it. The engine watchdog (`capture/engine_guard.py`) is told the group: when playtester
dies, however it died (SIGKILL included), the watchdog kills the group, so no game is left
orphaned. The game's output goes to a scratch file; its last line is quoted when the game fails
to start.

`start()` waits for the game's window: a window whose title matches and whose process belongs
to the game's group (a window without a `_NET_WM_PID` is taken by its title alone). A command
that is not a program, a game that exits before its window appears, and a window that does not
appear within `wait` seconds are each one `UserError`, with nothing left running.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

from playtester.errors import UserError
from playtester.capture.window.platform import Desktop, WindowInfo, title_matcher, visible_titles

LAUNCH_WAIT = 30.0
"""Seconds a launched game has to show its window."""


def launch_argv(command: str, given_as: str = "--launch") -> list[str]:
    """The program and arguments of a launch command; a `UserError` when it names no program."""
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise UserError(f"{given_as} {command!r}: cannot be split into a program and its arguments ({e})") from None
    if not argv:
        raise UserError(f"{given_as}: empty; give the command that starts the game, e.g. --launch \"./MyGame -windowed\"")
    program = argv[0]
    if os.path.basename(program) == "env":  # `env A=1 B=2 game …`: the program is the first word that sets nothing
        program = next((a for a in argv[1:] if "=" not in a and not a.startswith("-")), "")
    if not program or shutil.which(program) is None:
        raise UserError(f"{given_as} {command!r}: {program or 'no program'} is not a program this machine can run "
                        "(check the path, or that it is executable)")
    return argv


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs (a zombie, dead but not reaped, does not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                state, _, group = f.read().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state not in ("Z", "X"):
            return True
    return False


def in_group(pid: int, pgid: int) -> bool:
    try:
        return os.getpgid(pid) == pgid
    except (ProcessLookupError, PermissionError):
        return False


class LaunchedGame:
    """One game process group: `start()` it and wait for its window, `stop()` it (also at exit)."""

    def __init__(self, command: str, *, title: str, regex: bool = False, wait: float = LAUNCH_WAIT,
                 given_as: str = "--launch") -> None:
        self.command, self.given_as = command, given_as
        self.argv = launch_argv(command, given_as)
        self.match = title_matcher(title, regex=regex, given_as=f"game window:{title!r}")
        self.title, self.regex = title, regex
        self.wait = float(wait)
        self.proc: subprocess.Popen | None = None
        self.launches = 0
        self._log = None

    @property
    def pgid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self, desktop: Desktop) -> WindowInfo:
        """Start the game and return its window; a `UserError` (with the game ended) when it fails."""
        from playtester.capture.engine_guard import EngineWatchdog

        self.stop()
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True, close_fds=True)
        EngineWatchdog.here().watch_group(self.proc.pid)
        self.launches += 1
        try:
            return self._wait_for_window(desktop)
        except BaseException:
            self.stop()
            raise

    def _wait_for_window(self, desktop: Desktop) -> WindowInfo:
        assert self.proc is not None
        deadline = time.monotonic() + self.wait
        while True:
            windows = desktop.windows()
            mine = [w for w in windows if self.match(w.title) and (w.pid is None or in_group(w.pid, self.proc.pid))]
            if mine:
                return mine[-1]
            if self.proc.poll() is not None and not group_alive(self.proc.pid):
                raise UserError(f"{self.given_as} {self.command!r}: the game exited (status {self.proc.returncode}) "
                                f"before its window appeared{self._last_words()}")
            if time.monotonic() > deadline:
                raise UserError(f"{self.given_as} {self.command!r}: no window titled {self.title!r} appeared within "
                                f"{self.wait:g} s (visible windows: {visible_titles(windows)}); check the title after "
                                "window:, or that the game opens a window on this display")
            time.sleep(0.1)

    def _last_words(self) -> str:
        """The game's last line of output, for an error."""
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = [ln.strip() for ln in self._log.read()[-4000:].decode("utf-8", "replace").splitlines() if ln.strip()]
        return f"; it said: {lines[-1][:200]}" if lines else ""

    def alive(self) -> bool:
        return self.proc is not None and group_alive(self.proc.pid)

    def stop(self, grace: float = 3.0) -> None:
        """End the game's whole process group: SIGTERM, then SIGKILL after `grace` seconds."""
        from playtester.capture.engine_guard import EngineWatchdog

        proc, self.proc = self.proc, None
        if proc is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + grace
                while group_alive(proc.pid) and time.monotonic() < deadline:
                    proc.poll()  # reap the leader, or it stays a zombie
                    time.sleep(0.05)
                if not group_alive(proc.pid):
                    break
            proc.wait()
            EngineWatchdog.here().forget_group(proc.pid)
        if self._log is not None:
            self._log.close()
            self._log = None
