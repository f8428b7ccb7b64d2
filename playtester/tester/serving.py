"""The tester's networks served to every game instance from one process, batched across them.

Without a server each game worker loads its own detector and test policy and runs them on its
own frames, one at a time. With `serve` (a `--config` knob of `run explore` and `run load`; on by
itself with `--device cuda` and more than one instance) one server process holds the only copy
of each, on the run's device. A worker sends its frame and waits; the server answers every
request waiting when it looks in one pass per network: the detector's frames as one batch, the
test steps as one encoder pass and one GRU pass, each game instance's test carrying on its own
state (`imitation/live.py`'s `LiveState`). Nothing waits to fill a batch: the requests that come
in while a batch is computed make the next one.

    server = ModelServer(spec.tester, spec.detector, spec.device)  # spawns the process; the models load there
    models = server.models                        # pickles into the game workers
    ServedDetector(models), ServedPolicy(models)  # in a worker: what the tester loop calls
    server.close()

The wire is a Unix socket (`multiprocessing.connection`, with a random key), one connection a
game instance, opened in its worker on first use. A request is a tuple; the answer is `("ok",
value)` or `("error", message)`, which the worker raises. The server dies with the run's process.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Client, Connection, Listener, wait
from pathlib import Path
from typing import Any

import numpy as np

from playtester.errors import UserError

START_TIMEOUT_S = 300.0
"""How long the server may take to load its models before the run gives up on it."""


def serving(spec: Any) -> bool:
    """Whether a run's tester networks are served (`serve`, or a GPU run of several instances)."""
    return spec.tester is not None and (spec.serve or (spec.device == "cuda" and spec.num_envs > 1))


@dataclass(frozen=True)
class ServedModels:
    """What a game worker needs to reach the server: its address and key, and what the tester
    loop reads of the models without running them (the detector's classes, the policy's scoring)."""

    address: str
    authkey: bytes
    classes: tuple[str, ...] | None
    """The detector's classes; None when the server has no detector (the run's OOIs come from
    engine labels, or it tests nothing)."""
    scoring: dict[str, Any] = field(default_factory=dict)
    """The test policy's scoring (the expert's action distribution, the success threshold)."""


class _Line:
    """One game worker's connection, opened on first use in the process that uses it (a forked
    worker does not share its parent's)."""

    def __init__(self, models: ServedModels) -> None:
        self.models = models
        self._conn: Connection | None = None
        self._pid = -1

    def ask(self, *request: Any) -> Any:
        if self._conn is None or self._pid != os.getpid():
            self._conn = Client(self.models.address, family="AF_UNIX", authkey=self.models.authkey)
            self._pid = os.getpid()
        try:
            self._conn.send(request)
            status, value = self._conn.recv()
        except (EOFError, OSError) as error:
            raise RuntimeError(f"the model server is gone ({error or type(error).__name__})") from None
        if status != "ok":
            raise RuntimeError(f"the model server: {value}")
        return value

    def __getstate__(self) -> dict[str, Any]:
        return {"models": self.models}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["models"])


class ServedDetector:
    """The detector as `ModelDetector` uses it (`predict`, `classes`), run by the server."""

    def __init__(self, models: ServedModels) -> None:
        if models.classes is None:
            raise ValueError("the model server has no detector")
        self.classes = list(models.classes)
        self._line = _Line(models)

    def predict(self, frames) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return self._line.ask("detect", [np.ascontiguousarray(f) for f in frames])


class ServedPolicy:
    """The test policy as the tester loop uses it (`reset`, `step`, `scoring`), run by the server,
    which keeps this game instance's state between steps."""

    def __init__(self, models: ServedModels) -> None:
        self.scoring = dict(models.scoring)
        self._line = _Line(models)
        self._reset = True

    def reset(self) -> None:
        self._reset = True  # told to the server with the next step: one round trip a step

    def step(self, frame: np.ndarray, box=None) -> np.ndarray:
        probs = self._line.ask("step", np.ascontiguousarray(frame), None if box is None else [float(v) for v in box], self._reset)
        self._reset = False
        return probs


class ModelServer:
    """The server process of a run: started here, ready when its models are loaded (a model that
    cannot be loaded is a `UserError` naming its option); `close()` ends it."""

    def __init__(self, tester: str, detector: str | None, device: str = "cpu", threads: int = 1, int8: bool = False) -> None:
        self._folder = tempfile.mkdtemp(prefix="playtester-serve-")
        address = str(Path(self._folder) / "socket")
        authkey = os.urandom(16)
        context = multiprocessing.get_context("spawn")  # CUDA, and torch's thread pool, do not survive a fork
        ours, theirs = context.Pipe()
        self._control = ours
        self.process = context.Process(target=_serve, args=(tester, detector, device, threads, int8, address, authkey, theirs),
                                       name="playtester-model-server", daemon=True)
        self.process.start()
        theirs.close()
        try:
            if not ours.poll(START_TIMEOUT_S):
                self.close()
                raise UserError(f"the model server did not start in {START_TIMEOUT_S:.0f} s")
            status, value = ours.recv()
        except (EOFError, OSError):
            self.close()
            raise UserError(f"the model server stopped while loading its models (exit code {self.process.exitcode})") from None
        if status != "ready":
            self.close()
            raise UserError(value)
        classes, scoring = value
        self.models = ServedModels(address, authkey, None if classes is None else tuple(classes), scoring)

    def stats(self) -> dict[str, float]:
        """Requests and batches answered so far, and the seconds spent computing them, per network:
        `detect_requests`, `detect_batches`, `detect_seconds`, the same for `step`."""
        self._control.send(("stats",))
        return self._control.recv()

    def close(self) -> None:
        if self.process.is_alive():
            try:
                self._control.send(("stop",))
            except OSError:
                pass
            self.process.join(timeout=10)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self._control.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> "ModelServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _serve(tester: str, detector: str | None, device: str, threads: int, int8: bool, address: str, authkey: bytes,
           control: Connection) -> None:
    """The server process: load the models (the test policy's GRUs and head in int8 with `int8`:
    the run's `acting`), say so, then answer until told to stop."""
    from playtester.capture.engine_guard import die_with_parent, leave_interrupts_to_parent

    die_with_parent()
    leave_interrupts_to_parent()
    import torch

    torch.set_num_threads(threads)
    from playtester.imitation.live import load_policy
    from playtester.perception.detector import load_detector

    loaded: dict[str, Any] = {}
    for option, path, load in (("--tester", tester, load_policy), ("--detector", detector, load_detector)):
        try:
            loaded[option] = load(path, map_location=device) if path else None
        except Exception as error:  # noqa: BLE001 - told to the run's process in one line
            control.send(("error", f"{option} {path}: the model server could not load it: {error}"))
            return
    policy, model = loaded["--tester"], loaded["--detector"]
    if int8 and policy is not None:
        policy.quantise()
    listener = Listener(address, family="AF_UNIX", authkey=authkey)
    control.send(("ready", (None if model is None else list(model.classes), dict(policy.scoring))))
    Answering(policy, model, listener, control).run()


class Answering:
    """The server's loop: take every waiting request, answer them a network at a time."""

    def __init__(self, policy, detector, listener: Listener, control: Connection) -> None:
        self.policy, self.detector = policy, detector
        self.listener, self.control = listener, control
        self.lines: list[Connection] = []
        self.new: list[Connection] = []
        self.lock = threading.Lock()
        self.states: dict[int, Any] = {}
        self.counts = {f"{kind}_{what}": 0 for kind in ("detect", "step") for what in ("requests", "batches", "seconds")}
        self.stopping = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                line = self.listener.accept()
            except (OSError, EOFError, multiprocessing.AuthenticationError):  # closed, or a caller without the key
                if self.stopping.is_set():
                    return
                continue
            with self.lock:
                self.new.append(line)

    def run(self) -> None:
        try:
            while True:
                with self.lock:
                    self.lines += self.new
                    self.new.clear()
                ready = wait([self.control, *self.lines], timeout=0.05)
                if self.control in ready:
                    if not self._control():
                        return
                    ready.remove(self.control)
                detects, steps = [], []
                for line in ready:
                    try:
                        request = line.recv()
                    except (EOFError, OSError):  # the worker is gone
                        self.lines.remove(line)
                        self.states.pop(id(line), None)
                        continue
                    (detects if request[0] == "detect" else steps).append((line, request))
                for kind, batch, compute in (("detect", detects, self._detect), ("step", steps, self._step)):
                    if batch:
                        started = time.perf_counter()
                        self._answer(batch, compute)
                        self.counts[f"{kind}_requests"] += len(batch)
                        self.counts[f"{kind}_batches"] += 1
                        self.counts[f"{kind}_seconds"] += time.perf_counter() - started
        finally:
            self.stopping.set()
            self.listener.close()

    def _control(self) -> bool:
        try:
            request = self.control.recv()
        except (EOFError, OSError):
            return False
        if request[0] == "stats":
            self.control.send(dict(self.counts))
            return True
        return False

    def _answer(self, batch: list[tuple[Connection, tuple]], compute) -> None:
        try:
            answers = compute(batch)
        except Exception as error:  # noqa: BLE001 - the workers raise it
            answers = [("error", f"{type(error).__name__}: {error}")] * len(batch)
        else:
            answers = [("ok", a) for a in answers]
        for (line, _), answer in zip(batch, answers):
            try:
                line.send(answer)
            except OSError:
                pass

    def _detect(self, batch) -> list:
        if self.detector is None:
            raise ValueError("this server has no detector")
        frames = [f for _, request in batch for f in request[1]]
        results = self.detector.predict(frames)
        answers, start = [], 0
        for _, request in batch:
            answers.append(results[start : start + len(request[1])])
            start += len(request[1])
        return answers

    def _step(self, batch) -> list:
        states = []
        for line, (_, _, _, reset) in batch:
            if reset or id(line) not in self.states:
                self.states[id(line)] = self.policy.new_state()
            states.append(self.states[id(line)])
        probs = self.policy.step_many([r[1] for _, r in batch], [r[2] for _, r in batch], states)
        return list(probs)
