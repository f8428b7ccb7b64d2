"""`demos --from-video`: gameplay footage labelled by the inverse-dynamics model, as demo episodes."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.console import Console
from rich.table import Table

from playtester.errors import UserError
from playtester.commands.options import about, frame_size, inputs_checked
from playtester.files import new_folder

console = Console()


def demos_from_video(source: Path, idm: Optional[Path], out: Path, *, behavior: str, fps: float, key_map: Optional[str],
                     size: str, steps: int, flag_below: float) -> None:
    """Label every video of `source` with the encoder's inverse-dynamics head into episodes under `out`."""
    from playtester.capture.keymap import load_keymap
    from playtester.perception.idm_label import PairLabeller, VideoLabelConfig, label_videos

    if idm is None:
        raise UserError("--from-video: pass --idm ENCODER.ckpt, the encoder whose inverse-dynamics head labels the frames")
    cfg = VideoLabelConfig(fps=fps, size=frame_size(size), flag_below=flag_below, episode_steps=steps, behavior=behavior)
    keymap = load_keymap(key_map)
    with about("--idm"):
        labeller = PairLabeller.load(idm)
    inputs_checked()
    from playtester.datasets.episodes import episode_folders

    with new_folder(out, kept=lambda: out.is_dir() and bool(episode_folders(out))):
        results = label_videos(source, out, idm, keymap, cfg, labeller=labeller,
                               say=lambda m: console.print(m, soft_wrap=True, markup=False, highlight=False))
    names = keymap.names
    counts = [sum(r.action_counts[i] for r in results) for i in range(len(names))]
    total = sum(counts)
    table = Table(title=f"{len(results)} video(s) → {sum(len(r.episodes) for r in results)} episodes in {out}")
    table.add_column("action")
    table.add_column("steps", justify="right")
    for name, n in zip(names, counts):
        table.add_row(name, f"{n} ({n / total:.0%})")
    console.print(table)
    low = sum(r.low_confidence for r in results)
    console.print(f"{total} steps labelled by {idm}; {low} ({low / total:.0%}) below confidence {flag_below:g}, flagged "
                  "low_confidence (train policy --idm-min-confidence drops them, --idm-weight weighs IDM steps)")
