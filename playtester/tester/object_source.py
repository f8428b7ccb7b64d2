"""What finds a run's objects of interest: a trained detector, or the engine's labels (an ablation).

The tester sees only pixels: a run, a plan and the agent benchmark find their OOIs with a
detector trained on labelled shots (`--detector CKPT`). The engine's own labels stand in only
when asked for by name (`--oracle-labels`), to measure the rest of the loop without the
detector's misses; every report says which it was, in one line (`describe_detector`,
`ORACLE_LABELS`), kept in the run's `config.yaml` and `summary.json` as `objects_found_by`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playtester.errors import UserError

ORACLE_LABELS = "engine labels: ablation"
"""How a report names a run whose objects came from the engine's labels (`--oracle-labels`)."""

NO_OBJECTS = "nothing (no --tester: the run tests no OOI)"
"""How a report names a run that looked for no objects."""

FOUND_BY_KEY = "objects_found_by"
"""The key of that line in a run's `config.yaml` and `summary.json`."""

NEEDS_A_SOURCE = ("give --detector models/detector.ckpt (trained by `playtester train detector` on labelled shots), "
                  "or --oracle-labels to find them through the engine's labels (an ablation; the built-in park only)")
"""What to give, when something must find objects and nothing was named."""


def held_out_ap50(path: str | Path) -> float | None:
    """The AP50 over all classes a detector checkpoint scored on its held-out shots at the end of
    its training (`checkpoint["playtester"]["held_out"]["map50"]`), or None when not recorded."""
    import torch

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return None  # load_detector names the file and the problem
    return held_out_ap50_in((ckpt.get("playtester") or {}) if isinstance(ckpt, dict) else {})


def held_out_ap50_in(notes: dict[str, Any]) -> float | None:
    """`held_out_ap50` from a detector checkpoint's notes (`load_detector_with_notes`), read already."""
    value = (notes.get("held_out") or {}).get("map50")
    return float(value) if isinstance(value, (int, float)) and value == value else None


def describe_detector(path: str | Path, notes: dict[str, Any] | None = None) -> str:
    """`detector models/detector.ckpt, AP50 87 % on its held-out shots` (or that it was not recorded);
    from its `notes` where the checkpoint was read already."""
    ap50 = held_out_ap50(path) if notes is None else held_out_ap50_in(notes)
    score = "held-out AP not recorded" if ap50 is None else f"AP50 {100 * ap50:.0f} % on its held-out shots"
    return f"detector {path}, {score}"


def check_object_source(detector: str | None, oracle_labels: bool, needed: bool, needed_by: str) -> None:
    """Refuse, in one line, a source given twice, the old `--detector ground-truth`, or none
    where `needed` (what needs it is `needed_by`, e.g. `--tester models/inspect.ckpt`)."""
    if detector == "ground-truth":
        raise UserError("--detector ground-truth: the engine's labels are the --oracle-labels flag now (an ablation); "
                        "give a trained detector checkpoint, or --oracle-labels")
    if detector is not None and oracle_labels:
        raise UserError(f"--detector {detector} and --oracle-labels: give one (the detector, or the engine's labels)")
    if needed and detector is None and not oracle_labels:
        raise UserError(f"{needed_by} needs something to find the objects with: {NEEDS_A_SOURCE}")
    if detector is not None and not Path(detector).is_file():
        raise UserError(f"--detector {detector}: no such checkpoint; train one with `playtester train detector`")


def object_source(detector: str | None, oracle_labels: bool, notes: dict[str, Any] | None = None) -> str:
    """The report's line for a run: the detector's description (from its checkpoint's `notes`
    where it was read already), the ablation, or nothing."""
    if oracle_labels:
        return ORACLE_LABELS
    return describe_detector(detector, notes) if detector else NO_OBJECTS


def found_by(config: dict[str, Any]) -> str:
    """The `objects_found_by` line of a run's config, also for runs written before it existed
    (whose `detector` was a checkpoint path or `ground-truth`)."""
    if config.get(FOUND_BY_KEY):
        return str(config[FOUND_BY_KEY])
    old = config.get("detector")
    if old == "ground-truth":
        return ORACLE_LABELS
    if old:
        return f"detector {old} (held-out AP not recorded)"
    return "not recorded"
