"""Sprites and DECORATE actors for the park's objects of interest.

Each kind is drawn procedurally (no asset files) with fine texture detail, so that the
low-resolution bug, the same picture pixelated in 8×8 blocks, is visible. Every kind has three
actors: normal, `Stretched` (the same sprite scaled 1.8× in height by the engine) and `Lowres`.
The actor's name carries kind and bug, and the engine reports it in its labels buffer.
"""

from __future__ import annotations

import io
import struct

import numpy as np
from PIL import Image, PngImagePlugin

from playtester.capture.park.layout import OOI_KINDS, actor_name

STRETCH_Y = 1.8
LOWRES_BLOCK = 8
SPRITE_PREFIX = {"pillar": "PPIL", "barrel": "PBAR", "tire": "PTIR", "chair": "PCHR"}
LOWRES_PREFIX = {"pillar": "QPIL", "barrel": "QBAR", "tire": "QTIR", "chair": "QCHR"}
DOOMEDNUM_BASE = 20100
SIZE = {"pillar": (28, 96), "barrel": (32, 44), "tire": (44, 44), "chair": (36, 56)}
"""Sprite width and height in pixels (= map units at scale 1)."""


def _noise(h: int, w: int, rng: np.random.Generator, amp: float) -> np.ndarray:
    return rng.normal(0.0, amp, size=(h, w, 1))


def _pillar(rng: np.random.Generator) -> np.ndarray:
    w, h = SIZE["pillar"]
    img = np.zeros((h, w, 4), dtype=float)
    x = np.linspace(-1, 1, w)[None, :, None]
    shade = 0.55 + 0.45 * np.sqrt(np.clip(1 - x**2, 0, 1))
    stone = np.array([150, 146, 138], dtype=float) * shade + _noise(h, w, rng, 14)
    for y in range(0, h, 12):  # mortar courses and offset joints make a fine pattern
        stone[y : y + 2] *= 0.55
        off = 0 if (y // 12) % 2 else w // 2
        stone[y : y + 12, off % w : off % w + 2] *= 0.6
    img[..., :3] = stone
    img[..., 3] = 255
    img[:6, :, :3] = np.array([120, 118, 112]) * 1.1
    return img


def _barrel(rng: np.random.Generator) -> np.ndarray:
    w, h = SIZE["barrel"]
    img = np.zeros((h, w, 4), dtype=float)
    x = np.linspace(-1, 1, w)[None, :, None]
    shade = 0.5 + 0.5 * np.sqrt(np.clip(1 - x**2, 0, 1))
    body = np.array([40, 110, 60], dtype=float) * shade + _noise(h, w, rng, 10)
    for y in (5, 6, h // 2 - 1, h // 2, h - 7, h - 6):
        body[y] = np.array([200, 190, 60]) * shade[0]
    body[:, ::4] *= 0.85  # vertical staves
    img[..., :3] = body
    img[..., 3] = 255
    return img


def _tire(rng: np.random.Generator) -> np.ndarray:
    w, h = SIZE["tire"]
    img = np.zeros((h, w, 4), dtype=float)
    yy, xx = np.mgrid[0:h, 0:w]
    r = np.hypot((xx - (w - 1) / 2) / (w / 2), (yy - (h - 1) / 2) / (h / 2))
    ring = (r < 1.0) & (r > 0.45)
    ang = np.arctan2(yy - h / 2, xx - w / 2)
    tread = ((np.floor(ang / (np.pi / 16)) % 2) == 0) & (r > 0.8)
    rubber = np.full((h, w, 3), 38.0) + _noise(h, w, rng, 6)
    rubber[tread] = 70
    hub = (r <= 0.45) & (r > 0.3)
    rubber[hub] = np.array([170, 170, 175])
    img[..., :3] = rubber
    img[..., 3] = np.where(ring | hub, 255, 0)
    return img


def _chair(rng: np.random.Generator) -> np.ndarray:
    w, h = SIZE["chair"]
    img = np.zeros((h, w, 4), dtype=float)
    wood = np.array([120, 72, 36], dtype=float)
    grain = wood * (0.85 + 0.15 * np.sin(np.arange(w) / 1.3))[None, :, None] + _noise(h, w, rng, 8)
    mask = np.zeros((h, w), dtype=bool)
    mask[0 : h // 2, 3:9] = True  # back post
    mask[0 : h // 2, w - 9 : w - 3] = True
    for y in range(4, h // 2 - 4, 7):  # back slats
        mask[y : y + 3, 3 : w - 3] = True
    mask[h // 2 : h // 2 + 6, 0:w] = True  # seat
    mask[h // 2 + 6 :, 2:7] = True  # legs
    mask[h // 2 + 6 :, w - 7 : w - 2] = True
    img[..., :3] = grain
    img[..., 3] = np.where(mask, 255, 0)
    return img


_DRAW = {"pillar": _pillar, "barrel": _barrel, "tire": _tire, "chair": _chair}


def sprite_rgba(kind: str, *, lowres: bool = False, seed: int = 1234) -> np.ndarray:
    """The RGBA sprite of a kind, `uint8 H×W×4`; `lowres` pixelates its colours in 8×8 blocks."""
    img = np.clip(_DRAW[kind](np.random.default_rng(seed + OOI_KINDS.index(kind))), 0, 255).astype(np.uint8)
    if lowres:
        # the colours pixelated, the silhouette kept: a texture streamed at too low a mip level
        h, w = img.shape[:2]
        rgb = Image.fromarray(np.ascontiguousarray(img[..., :3]))
        small = rgb.resize((max(1, w // LOWRES_BLOCK), max(1, h // LOWRES_BLOCK)), Image.BOX)
        img = np.concatenate([np.asarray(small.resize((w, h), Image.NEAREST)), img[..., 3:]], axis=2)
    return img


def sprite_png(img: np.ndarray) -> bytes:
    """PNG bytes with a `grAb` chunk: the engine centres the sprite and stands it on the floor."""
    h, w = img.shape[:2]
    info = PngImagePlugin.PngInfo()
    info.add(b"grAb", struct.pack(">ii", w // 2, h - 2))
    out = io.BytesIO()
    Image.fromarray(img, "RGBA").save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def doomednum(kind: str, bug: str | None) -> int:
    return DOOMEDNUM_BASE + 3 * OOI_KINDS.index(kind) + {None: 0, "stretched": 1, "lowres": 2}[bug]


def decorate_text() -> str:
    """The DECORATE lump. One statement a line: the engine's parser is strict about layout."""
    blocks = []
    for kind in OOI_KINDS:
        w, h = SIZE[kind]
        radius = max(8, w // 2 - 2)
        base = actor_name(kind, None)
        blocks.append(
            f"actor {base} {doomednum(kind, None)}\n{{\n  Radius {radius}\n  Height {h}\n  +SOLID\n"
            f"  States\n  {{\n  Spawn:\n    {SPRITE_PREFIX[kind]} A -1\n    Stop\n  }}\n}}\n"
        )
        blocks.append(
            f"actor {actor_name(kind, 'stretched')} : {base} {doomednum(kind, 'stretched')}\n{{\n"
            f"  Height {int(h * STRETCH_Y)}\n  XScale 1.0\n  YScale {STRETCH_Y}\n}}\n"
        )
        blocks.append(
            f"actor {actor_name(kind, 'lowres')} : {base} {doomednum(kind, 'lowres')}\n{{\n"
            f"  States\n  {{\n  Spawn:\n    {LOWRES_PREFIX[kind]} A -1\n    Stop\n  }}\n}}\n"
        )
    return "\n".join(blocks)


def sprite_lumps() -> list[tuple[str, bytes]]:
    """`(lump name, PNG)` for every sprite: normal and low-resolution per kind."""
    lumps = []
    for kind in OOI_KINDS:
        lumps.append((SPRITE_PREFIX[kind] + "A0", sprite_png(sprite_rgba(kind))))
        lumps.append((LOWRES_PREFIX[kind] + "A0", sprite_png(sprite_rgba(kind, lowres=True))))
    return lumps
