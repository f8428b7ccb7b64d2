"""A private virtual screen (Xvfb) for headless servers, tests and benchmarks."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time

from playtester.errors import UserError


class VirtualDisplay:
    """An Xvfb server on a free display number; `name` is what DISPLAY should be (`:N`)."""

    def __init__(self, screen: str = "1024x768x24", timeout: float = 20.0) -> None:
        xvfb = shutil.which("Xvfb")
        if xvfb is None:
            raise UserError("no virtual screen: Xvfb is not installed (Debian: apt-get install xvfb)")
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            # -noreset: the server keeps going when its last client leaves (a game started right then would not connect)
            [xvfb, "-displayfd", str(write_fd), "-screen", "0", screen, "-nolisten", "tcp", "-noreset"],
            pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(write_fd)
        deadline = time.monotonic() + timeout
        said = b""
        try:
            # Read up to the newline: Xvfb dies if the pipe closes between its digits and the newline.
            while not said.endswith(b"\n") and time.monotonic() < deadline:
                ready, _, _ = select.select([read_fd], [], [], 0.5)
                chunk = os.read(read_fd, 64) if ready else b""
                if ready and not chunk:
                    break
                said += chunk
        finally:
            os.close(read_fd)
        self.name = f":{said.decode().strip()}" if said.strip() else ""
        while self.name and time.monotonic() < deadline:  # it says its number a moment before it answers
            if self._answers():
                return
            time.sleep(0.05)
        self.close()
        raise UserError(f"Xvfb did not start a display that answers within {timeout:g} s")

    def _answers(self) -> bool:
        from Xlib import display, error

        try:
            display.Display(self.name).close()
            return True
        except (error.DisplayError, OSError):
            return False

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "VirtualDisplay":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
