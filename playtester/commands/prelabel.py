"""`shots --demos … --prelabel DETECTOR.ckpt`: frames to label with a detector's boxes as their
first draft, most uncertain first (`playtester.perception.prelabel`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from playtester.errors import UserError
from playtester.commands.options import about

BATCH = 16
"""Frames the detector takes at once."""


def demo_classes(episodes: list[Any], every: int) -> set[str]:
    """The classes of the objects the episodes' kept frames carry (the park's labels), if any."""
    return {str(o["class"]) for ep in episodes for t in range(0, len(ep), every) for o in ep.steps[t].get("objects", [])}


def prelabelled_shots(demos: Path, out: Path, every: int, min_box: int, checkpoint: Path,
                      progress: Callable[[], Any]) -> tuple[Path, dict[str, int]]:
    """Every `every`-th frame of the demos, with the detector's boxes at or above `PRELABEL_SCORE`
    as pre-labels (boxes under `min_box` left out: too small to ask for), written as
    COCO in order of uncertainty, the most uncertain first; `(labels.json, pre-labels per class)`."""
    import numpy as np

    from playtester.datasets.coco import CocoWriter, box_size
    from playtester.datasets.episodes import load_episodes
    from playtester.perception.detector import load_detector
    from playtester.perception.prelabel import (CANDIDATE_SCORE, PRELABEL_SCORE, most_uncertain_first,
                                                prelabels_of)

    with about("--demos"):
        episodes = load_episodes(demos)
    with about("--prelabel"):
        detector = load_detector(checkpoint)
    classes = list(detector.classes)
    theirs = demo_classes(episodes, every)
    if theirs and not theirs <= set(classes):
        raise UserError(f"--prelabel {checkpoint}: its classes ({', '.join(classes)}) differ from the shots' "
                        f"({', '.join(sorted(theirs))}); give a detector trained on this game's objects")
    frames = [(ep, t) for ep in episodes for t in range(0, len(ep), every)]
    threshold = PRELABEL_SCORE
    drafts = []
    with progress() as bar:
        task = bar.add_task("pre-labelling", total=len(frames))
        for start in range(0, len(frames), BATCH):
            chunk = frames[start:start + BATCH]
            for boxes, labels, scores in detector.predict(np.stack([np.asarray(ep.frames[t]) for ep, t in chunk]),
                                                          score_threshold=CANDIDATE_SCORE):
                drafts.append(prelabels_of(boxes, labels, scores, threshold))
            bar.advance(task, len(chunk))
    categories = [{"id": i + 1, "name": c, "supercategory": "object"} for i, c in enumerate(classes)]
    writer = CocoWriter(out, categories)
    for i in most_uncertain_first(drafts):
        (ep, t), draft = frames[i], drafts[i]
        objects = [{"class": classes[int(label) - 1], "box": [float(v) for v in box], "score": float(score)}
                   for box, label, score in zip(draft.boxes, draft.labels, draft.scores) if box_size(box) >= min_box]
        writer.add(ep.frames[t], objects, episode=ep.name, t=t, uncertainty=round(draft.uncertainty, 4))
    path = writer.close(source=str(demos), prelabels={"detector": str(checkpoint), "score_threshold": threshold,
                                                      "order": "most uncertain first"})
    return path, writer.counts
