"""Oracles: what counts as a bug, judged every step from what the agent sees and knows.

Each oracle returns `Finding`s; the tester loop keeps, for every finding, the frames and the
action trace that led to it so `playtester replay` can reproduce it.

- `CrashOracle`: the game's process died or its window vanished (`info["crashed"]`).
- `StuckOracle`: inputs were sent but the picture has not changed for `patience` steps.
- `AssertionOracle`: user assertions, Python callables over `(frame, info)`.
- `TextureOracle`: judges a tested OOI from its crops: stretched (its box is taller or wider
  than its kind's reference shape) or low-resolution (its texels are large for its size).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from playtester.capture.window.play_state import STILL_TOLERANCE, look, same_picture
from playtester.errors import UserError
from playtester.files import read_json
from playtester.plugins import load_function


@dataclass
class Finding:
    """One bug found: what, when, and enough to reproduce it."""

    kind: str
    """crash, stuck, assertion, texture, low_fps, …"""
    message: str
    episode: int
    step: int
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CrashOracle:
    name = "crash"
    judges_replays = True
    """A crash can come at any step, a replayed one too (`returns`: the other oracles judged those
    steps when they were first played)."""

    def reset(self) -> None:
        pass

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        if info.get("crashed"):
            return [Finding("crash", str(info.get("crash_reason", "the game's process is gone")), episode, step)]
        return []


class StuckOracle:
    """Inputs were sent, yet the frame stayed the same: no pixel of its `look` (64×48 grey, area
    averaged, as the window harness's still-picture watch compares) moved by more than `tolerance`
    grey levels. A change anywhere counts, however small its share of the screen: a 2D game's
    paddle moving under the keys is play, though it changes a frame's mean by under 0.1 (the
    mean change was the rule before, and called LBreakout2 stuck while its ball sat on the paddle)."""

    name = "stuck"

    def __init__(self, patience: int = 20, tolerance: float = STILL_TOLERANCE) -> None:
        if patience < 1:
            raise UserError(f"stuck patience {patience}: use at least 1 step")
        self.patience = patience
        self.tolerance = tolerance
        self.reset()

    def reset(self) -> None:
        self._last: np.ndarray | None = None
        self._still = 0
        self._reported = False

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        small = look(frame)
        if self._last is not None and action is not None:
            if same_picture(small, self._last, self.tolerance):
                self._still += 1
            else:
                self._still = 0
                self._reported = False
        self._last = small
        if self._still >= self.patience and not self._reported:
            self._reported = True
            return [Finding("stuck", f"the picture has not changed for {self._still} steps of input", episode, step,
                            {"steps": self._still, "position": info.get("position")})]
        return []


Assertion = Callable[[np.ndarray, dict[str, Any]], Any]


def load_assertion(spec: str) -> tuple[str, Assertion]:
    """`module:function` or `path/to/file.py:function` → (name, callable)."""
    return spec, load_function(spec, "--assert")


class AssertionOracle:
    """User assertions: a callable `(frame, info)` that returns True/None when all is well, and
    False or a message when it is not. An assertion that raises is itself a finding."""

    name = "assertion"

    def __init__(self, assertions: Sequence[tuple[str, Assertion]]) -> None:
        self.assertions = list(assertions)

    def reset(self) -> None:
        pass

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        out = []
        for name, fn in self.assertions:
            try:
                verdict = fn(frame, info)
            except Exception as e:
                out.append(Finding("assertion", f"{name} raised {type(e).__name__}: {e}", episode, step, {"assertion": name}))
                continue
            if verdict is None or verdict is True:
                continue
            message = verdict if isinstance(verdict, str) else f"{name} failed"
            out.append(Finding("assertion", message, episode, step, {"assertion": name}))
        return out


# -- texture ---------------------------------------------------------------------------------

def _run_length(crop: np.ndarray) -> float:
    """The horizontal run of identical colour that covers half the crop's pixels (a pixel-weighted
    median): the on-screen size of a texel, robust to the background showing through holes."""
    c = crop.astype(np.int32)
    key = (c[..., 0] << 16) | (c[..., 1] << 8) | c[..., 2]
    runs = []
    for row in key:
        edges = np.flatnonzero(np.diff(row) != 0)
        runs.append(np.diff(np.concatenate(([-1], edges, [len(row) - 1]))))
    lengths = np.sort(np.concatenate(runs))
    covered = np.cumsum(lengths)
    return float(lengths[np.searchsorted(covered, covered[-1] / 2)])


def crop_measures(frame: np.ndarray, box: Sequence[float], *, min_height: int = 40, min_width: int = 12,
                  edge: float = 0.04) -> dict[str, float] | None:
    """Shape and texel size of one OOI crop, or None when it is too small or cut by the frame edge.

    `aspect` is the box's height over width. `texel` is the run length of identical pixels
    (`_run_length`) inside the box's inner 60 % over the box width: about one texel over the
    sprite's width for a healthy texture, several times that for a pixelated low-resolution one.
    Small crops are skipped: far away, texels shrink below a pixel and say nothing. A box within
    `edge` of the frame's side of an edge counts as cut: a detector's box of an object the edge
    cuts often stops a few pixels short of it (measured: 1–9 px at 240 px), and its shape is wrong.
    Where the sprite's own silhouette (`silhouette`) runs past the box, its shape is the aspect;
    where it runs into the frame's edge, the crop is cut.
    """
    h_img, w_img = frame.shape[:2]
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    mx, my = edge * w_img, edge * h_img
    if x0 < mx or y0 < my or x1 > w_img - mx or y1 > h_img - my:
        return None
    w, h = x1 - x0, y1 - y0
    if h < min_height or w < min_width:
        return None
    inner = frame[y0 + h // 5 : y1 - h // 5, x0 + w // 5 : x1 - w // 5]
    aspect = h / w
    shape = silhouette(frame, (x0, y0, x1, y1))
    if shape == "cut":
        return None
    if shape is not None:
        sx0, sy0, sx1, sy1 = shape
        if sx1 - sx0 > 1.1 * w or sy1 - sy0 > 1.1 * h:  # the sprite runs past its box: its own shape counts
            aspect = (sy1 - sy0) / (sx1 - sx0)
    return {"aspect": aspect, "texel": _run_length(inner) / w}


def silhouette(frame: np.ndarray, box: tuple[int, int, int, int], *, widen: float = 0.3, margin: int = 3,
               threshold: int = 40) -> tuple[int, int, int, int] | str | None:
    """The sprite's own extent around a box, or "cut" when it runs into the frame's edge, or None
    when it cannot be told from the background.

    A detector's box of a stretched sprite comes out nearer its class's usual shape (the box
    regressor learned from healthy ones), and a box a few pixels short of the frame's edge hides
    that the frame cuts the object. So the box is widened by `widen` on every side, each row's
    background is the median colour of that row's outer `margin` columns, and a pixel differing
    from it by more than `threshold` in some channel is the sprite's. Its extent: the columns
    where the sprite takes at least a quarter of the rows it appears in, the rows where it takes
    a tenth of the columns. An extent that reaches the widened crop's side (merged with the
    background, or the crop too tight) says nothing."""
    h_img, w_img = frame.shape[:2]
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    cx0, cx1 = max(0, round(x0 - widen * w)), min(w_img, round(x1 + widen * w))
    cy0, cy1 = max(0, round(y0 - widen * h)), min(h_img, round(y1 + widen * h))
    crop = frame[cy0:cy1, cx0:cx1].astype(np.int16)
    if crop.shape[1] < 2 * margin + 4 or crop.shape[0] < 8:
        return None
    background = np.median(np.concatenate([crop[:, :margin], crop[:, -margin:]], axis=1), axis=1)
    sprite = np.abs(crop - background[:, None, :]).max(axis=2) > threshold
    if not sprite.any():
        return None
    cols = np.flatnonzero(sprite.mean(axis=0) >= 0.25 * sprite.any(axis=1).mean())
    rows = np.flatnonzero(sprite.mean(axis=1) >= 0.1)
    if not len(cols) or not len(rows):
        return None
    sx0, sx1, sy0, sy1 = int(cols[0]), int(cols[-1]) + 1, int(rows[0]), int(rows[-1]) + 1
    width, height = crop.shape[1], crop.shape[0]
    into_left, into_right = sx0 < margin, sx1 > width - margin  # the sprite reaches the background columns
    if (sy0 == 0 and cy0 == 0) or (sy1 == height and cy1 == h_img) or (into_left and cx0 == 0) or (into_right and cx1 == w_img):
        return "cut"
    if into_left or into_right or sy0 == 0 or sy1 == height:
        return None
    return cx0 + sx0, cy0 + sy0, cx0 + sx1, cy0 + sy1


@dataclass
class TextureVerdict:
    stretched: bool
    lowres: bool
    aspect_ratio: float
    """Median crop aspect over the kind's reference aspect (1 for a healthy shape)."""
    texel_ratio: float
    """Median texel size over the kind's reference texel size (1 for a healthy texture)."""
    crops: int

    @property
    def bug(self) -> str | None:
        if self.stretched:
            return "stretched"
        if self.lowres:
            return "lowres"
        return None


@dataclass
class TextureOracle:
    """Judges a tested OOI from the crops collected while testing it, against references of
    healthy objects of its kind (learned from labelled shots)."""

    reference_aspect: dict[str, float]
    """Each kind's healthy height/width."""
    reference_texel: dict[str, float]
    """Each kind's healthy texel size over box width."""
    stretch_threshold: float = 1.35
    """An aspect this many times the reference (or its inverse) is a stretched texture."""
    lowres_threshold: float = 1.5
    """A texel this many times the reference is a low-resolution texture."""
    min_crops: int = 3

    def judge(self, kind: str, crops: Sequence[tuple[np.ndarray, Sequence[float]]]) -> TextureVerdict | None:
        """The verdict on one OOI, or None with too few usable crops or an unknown kind."""
        measures = [m for m in (crop_measures(f, b) for f, b in crops) if m]
        if len(measures) < self.min_crops or kind not in self.reference_aspect:
            return None
        aspect = float(np.median([m["aspect"] for m in measures])) / self.reference_aspect[kind]
        texel = float(np.median([m["texel"] for m in measures])) / self.reference_texel[kind]
        stretched = aspect >= self.stretch_threshold or aspect <= 1.0 / self.stretch_threshold
        return TextureVerdict(stretched=stretched, lowres=texel >= self.lowres_threshold,
                              aspect_ratio=aspect, texel_ratio=texel, crops=len(measures))

    @classmethod
    def from_coco(cls, labels: str | Path, **kwargs: Any) -> "TextureOracle":
        """References from a COCO file and its images: the median aspect and texel size of each
        category's usable boxes not marked as bugged (`attributes.bug` absent or `none`)."""
        import cv2

        path = Path(labels)
        doc = read_json(path, f"texture reference {path}")
        if not isinstance(doc, dict):
            raise UserError(f"texture reference {path}: expected COCO labels (a JSON object with images, annotations, categories)")
        names = {c["id"]: c["name"] for c in doc.get("categories", [])}
        by_image: dict[int, list[dict]] = {}
        for a in doc.get("annotations", []):
            if not a.get("iscrowd") and (a.get("attributes") or {}).get("bug", "none") in (None, "none"):
                by_image.setdefault(a["image_id"], []).append(a)
        measures: dict[str, list[dict[str, float]]] = {}
        for img in doc.get("images", []):
            anns = by_image.get(img["id"])
            if not anns:
                continue
            bgr = cv2.imread(str(path.parent / img["file_name"]))
            if bgr is None:
                raise UserError(f"texture reference {path}: image {img['file_name']} is missing or unreadable")
            frame = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
            for a in anns:
                x, y, w, h = a["bbox"]
                m = crop_measures(frame, (x, y, x + w, y + h))
                if m:
                    measures.setdefault(names.get(a["category_id"], "?"), []).append(m)
        if not measures:
            raise UserError(f"texture reference {path}: no unbugged boxes of 40 px or more to learn from; take closer shots")
        return cls(
            reference_aspect={k: float(np.median([m["aspect"] for m in v])) for k, v in measures.items()},
            reference_texel={k: float(np.median([m["texel"] for m in v])) for k, v in measures.items()},
            **kwargs,
        )
