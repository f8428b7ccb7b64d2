"""Action validation, decoupled from the plan: one registry of Python callables keyed by action.

Before an action the runner calls its pre-action callbacks, which snapshot what they need (a
telemetry value, a crop of the frame); after it, each post-action check runs once its delay has
passed or once its event fires, and compares. Whichever node or rule performed the action, the
same checks run, so a rule firing out of order is validated like a node.

    registry = ValidationRegistry()

    @registry.pre("jump")
    def height(m): return m.info["position"][2]

    @registry.event("landed")
    def landed(m): return m.info["position"][2] <= 0

    @registry.post("jump", delay=2)
    def rose(before, after): return after.info["position"][2] > before.data["height"] or "did not leave the ground"

A check passes when it returns None or True, and fails on False or a message. A callback that
raises, or does not answer within its timeout (seconds), fails the node with the reason; the
runner goes on. An event that does not fire within its steps fails the check.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from playtester.errors import UserError
from playtester.plugins import load_module

ANY_ACTION = "*"


@dataclass
class Moment:
    """What the agent saw and knew at one step, handed to every callback."""

    step: int
    frame: np.ndarray
    info: dict[str, Any]
    detections: list[dict[str, Any]]
    action: str
    """The action being validated."""
    owner: str
    """The node or rule that performs it."""
    data: dict[str, Any] = field(default_factory=dict)
    """Pre-action snapshots, by callback name (filled on the moment before the action)."""


@dataclass(frozen=True)
class PreCallback:
    name: str
    fn: Callable[[Moment], Any]
    timeout: float


@dataclass(frozen=True)
class PostCheck:
    name: str
    fn: Callable[[Moment, Moment], Any]
    delay: int
    """Steps after the action before the check runs (when no event is named)."""
    event: str | None
    """Run when this registered event fires instead."""
    within: int
    """Steps the event has to fire; past them the check fails."""
    timeout: float
    """Seconds the callback may take."""


@dataclass(frozen=True)
class Event:
    name: str
    fn: Callable[[Moment], Any]
    timeout: float


@dataclass
class Outcome:
    """One callback's result: `ok`, its `value`, and when not ok, why."""

    ok: bool
    value: Any = None
    reason: str = ""


def call_with_timeout(fn: Callable[..., Any], args: tuple, timeout: float, name: str) -> Outcome:
    """Call `fn(*args)` in a daemon thread; a raise or no answer within `timeout` s is a failed outcome."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - whatever a user callback raises is a failure
            box["error"] = f"{type(e).__name__}: {e}"

    worker = threading.Thread(target=target, name=f"validation-{name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return Outcome(False, reason=f"{name} hung (no answer within {timeout:g} s)")
    if "error" in box:
        return Outcome(False, reason=f"{name} raised {box['error']}")
    return Outcome(True, box.get("value"))


def verdict(outcome: Outcome, name: str) -> str | None:
    """Why a post-check failed, or None when it passed."""
    if not outcome.ok:
        return outcome.reason
    if outcome.value is None or outcome.value is True:
        return None
    if isinstance(outcome.value, str):
        return f"{name}: {outcome.value}"
    return f"{name} failed (returned {outcome.value!r})"


class ValidationRegistry:
    """Pre-action callbacks, post-action checks and events, keyed by action name (`*`: any)."""

    def __init__(self) -> None:
        self._pre: dict[str, list[PreCallback]] = {}
        self._post: dict[str, list[PostCheck]] = {}
        self.events: dict[str, Event] = {}

    def pre(self, action: str, *, name: str | None = None, timeout: float = 2.0):
        """Decorator: `fn(moment)` runs before `action`; its result lands in `moment.data[name]`."""
        def add(fn):
            self._pre.setdefault(action, []).append(PreCallback(name or fn.__name__, fn, _positive(timeout, "timeout")))
            return fn
        return add

    def post(self, action: str, *, delay: int = 0, event: str | None = None, within: int = 50,
             name: str | None = None, timeout: float = 2.0):
        """Decorator: `fn(before, after)` checks `action` after `delay` steps, or when `event` fires."""
        if delay < 0 or within < 1:
            raise UserError(f"post-check for {action!r}: delay must be 0 or more steps and within at least 1")

        def add(fn):
            self._post.setdefault(action, []).append(
                PostCheck(name or fn.__name__, fn, int(delay), event, int(within), _positive(timeout, "timeout")))
            return fn
        return add

    def event(self, name: str, *, timeout: float = 2.0):
        """Decorator: `fn(moment) -> bool` says whether the event happened at this step."""
        def add(fn):
            self.events[name] = Event(name, fn, _positive(timeout, "timeout"))
            return fn
        return add

    def pre_for(self, action: str) -> list[PreCallback]:
        return self._pre.get(action, []) + self._pre.get(ANY_ACTION, [])

    def post_for(self, action: str) -> list[PostCheck]:
        return self._post.get(action, []) + self._post.get(ANY_ACTION, [])

    def check(self, where: str = "validations") -> None:
        """Every post-check's event is registered."""
        for action, checks in self._post.items():
            for c in checks:
                if c.event is not None and c.event not in self.events:
                    known = ", ".join(self.events) or "none"
                    raise UserError(f"{where}: post-check {c.name!r} for {action!r} waits for event {c.event!r}, "
                                    f"which is not registered (events: {known})")


def _positive(value: float, what: str) -> float:
    if not value > 0:
        raise UserError(f"validation {what} {value!r}: use a positive number of seconds")
    return float(value)


@dataclass
class PendingCheck:
    """A post-check waiting for its delay or its event."""

    check: PostCheck
    before: Moment
    since: int
    """The step the action ended."""

    def poll(self, now: Moment, events: dict[str, Event]) -> str | None | bool:
        """False while still waiting; else None (passed) or the reason it failed."""
        waited = now.step - self.since
        if self.check.event is None:
            if waited < self.check.delay:
                return False
        else:
            event = events[self.check.event]
            fired = call_with_timeout(event.fn, (now,), event.timeout, f"event {event.name!r}")
            if not fired.ok:
                return fired.reason
            if not fired.value:
                if waited >= self.check.within:
                    return f"{self.check.name}: event {event.name!r} did not happen within {self.check.within} steps"
                return False
        return verdict(call_with_timeout(self.check.fn, (self.before, now), self.check.timeout, self.check.name),
                       self.check.name)


def load_validations(spec: str | Path) -> ValidationRegistry:
    """A registry from `file.py` or a module: its `registry` (a ValidationRegistry) or its
    `register(registry)` function."""
    where = f"--validations {spec}"
    module = load_module(str(spec), "--validations")
    registry = getattr(module, "registry", None)
    if not isinstance(registry, ValidationRegistry):
        register = getattr(module, "register", None)
        if not callable(register):
            raise UserError(f"{where}: define `registry = ValidationRegistry()` or a function `register(registry)`")
        registry = ValidationRegistry()
        register(registry)
    registry.check(where)
    return registry
