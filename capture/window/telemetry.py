"""Optional telemetry from a game's dev build: JSON lines over UDP to a local port.

A datagram holds one or more lines, each a JSON object. Known keys are turned into the names
`info` uses everywhere: `pos` → `position` (x, y[, z]), `angle`, `fps` (and `frame_time_ms` =
1000 / fps). `event` (a string or object) or `events` (a list) are collected until the next
`poll()`. Any other key is kept, latest value, under `telemetry`. Lines that are not telemetry
(not UTF-8 JSON objects, a binary packet, a `pos` of the wrong size) are counted, never raised: a
game's debug output must not stop a test run; the first of each kind is said in one warning line
that names the port and what to send instead.

Example sender (a game's dev build, once a frame; docs/telemetry.md has the protocol and senders
for Unity, Godot and Unreal):

    sock.sendto(b'{"pos":[12.50,3.00,0.00],"angle":90.0,"fps":58.2}\\n', ("127.0.0.1", PORT))
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from typing import Any

from playtester.errors import UserError

log = logging.getLogger(__name__)

EXAMPLE = '{"pos":[12.50,3.00,0.00],"angle":90.0,"fps":58.2}'
"""One line of telemetry, as the warnings show it."""


class TelemetryListener:
    """Receives telemetry on `host:port` in a background thread; `poll()` gives what is new."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.bind((host, int(port)))
        except OSError as e:
            self._sock.close()
            raise UserError(f"--telemetry-port {port}: cannot listen on {host}:{port} ({e.strerror}); choose another port") from None
        self._sock.settimeout(0.2)
        self.host, self.port = self._sock.getsockname()[:2]
        self._lock = threading.Lock()
        self._latest: dict[str, Any] = {}
        self._extra: dict[str, Any] = {}
        self._events: list[Any] = []
        self.received = 0
        self.bad_lines = 0
        self.problems: dict[str, str] = {}
        """The first bad line of each kind (`binary`, `not json`, `not an object`, `bad value`), in words."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"telemetry:{self.port}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                self._bad("binary", f"a {len(data)}-byte packet that is not UTF-8 text (a binary struct?)")
                continue
            for line in text.splitlines():
                if line.strip():
                    self._take(line)

    def _bad(self, kind: str, what: str) -> None:
        """Count a line that is not telemetry; say the first of each kind in one warning line."""
        with self._lock:
            self.bad_lines += 1
            first = kind not in self.problems
            self.problems.setdefault(kind, what)
        if first:
            log.warning("telemetry on %s:%d: %s; send UTF-8 JSON lines, one object a line, e.g. %s (docs/telemetry.md)",
                        self.host, self.port, what, EXAMPLE)

    def _take(self, line: str) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            self._bad("not json", f"a line that is not JSON ({line[:40]!r}, {len(line.encode())} bytes)")
            return
        if not isinstance(record, dict):
            self._bad("not an object", f"a JSON line that is not an object ({line[:40]!r})")
            return
        try:
            update = parse_record(record)
        except (ValueError, TypeError) as e:
            self._bad("bad value", f"a line whose {e} ({line[:60]!r})")
            return
        with self._lock:
            self.received += 1
            events = update.pop("events", [])
            extra = update.pop("telemetry", {})
            self._events.extend(events)
            self._extra.update(extra)
            self._latest.update(update)

    def poll(self) -> dict[str, Any]:
        """The latest values (merged into `info`), and the events received since the last poll."""
        with self._lock:
            out = dict(self._latest)
            if self._extra:
                out["telemetry"] = dict(self._extra)
            if self._events:
                out["events"], self._events = self._events, []
        return out

    def wait_for_first(self, timeout: float) -> bool:
        """Wait until a first line has come (a game just started may not have sent one yet)."""
        deadline = time.monotonic() + timeout
        while self.received == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.received > 0

    def drop_events(self) -> None:
        """Forget the events not yet handed out (they belong to the episode that ended)."""
        with self._lock:
            self._events = []

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        self._sock.close()


def parse_record(record: dict[str, Any]) -> dict[str, Any]:
    """One telemetry object in `info`'s names; raises `ValueError` when a known key is malformed."""
    out: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in record.items():
        if key in ("pos", "position"):
            if not isinstance(value, (list, tuple)) or len(value) not in (2, 3):
                raise ValueError(f"{key} has {len(value) if isinstance(value, (list, tuple)) else 'not a list of'} "
                                 "numbers (give 2 or 3: x, y[, z])")
            out["position"] = tuple(_number(key, v) for v in value)
        elif key == "angle":
            out["angle"] = _number(key, value) % 360.0
        elif key == "fps":
            fps = _number(key, value)
            out["fps"] = fps
            if fps > 0:
                out["frame_time_ms"] = 1000.0 / fps
        elif key == "event":
            out.setdefault("events", []).append(value)
        elif key == "events":
            out.setdefault("events", []).extend(list(value))
        else:
            extra[str(key)] = value
    if extra:
        out["telemetry"] = extra
    return out


def _number(key: str, value: Any) -> float:
    try:
        if isinstance(value, bool):
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} is {json.dumps(value)[:20]}, not a number") from None
