"""The detector: config checks, weights messages, checkpoint round trip, fine-tuning on park shots."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch

from playtester.errors import UserError
from playtester.cli import main
from playtester.datasets.detection import detector_splits, load_coco, read_rgb
from playtester.perception.detector import Detector, DetectorConfig, DetectorModule, load_detector
from playtester.perception.detector_eval import detection_loss, evaluate_detector

CLASSES = ["pillar", "barrel", "tire", "chair"]


@pytest.fixture(scope="module")
def shots(tmp_path_factory, small_park) -> Path:
    """300 auto-labelled park shots at 160×120, balanced over the four OOI kinds."""
    out = tmp_path_factory.mktemp("det") / "shots"
    assert main(["shots", "--game", small_park, "--n", "300", "--out", str(out), "--resolution", "160x120"]) == 0
    return out


def held_out(coco, cfg: DetectorConfig):
    """The images a detector's training held out, by the rule its config names."""
    assert cfg.split == "held-out"
    return detector_splits(coco, cfg.split, cfg.split_seed, cfg.held_out_boxes)["test"]


def _png(path: Path, width: int, height: int) -> None:
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.zeros((height, width, 3), np.uint8))


def _hand_made_coco(folder: Path, boxes_by_image: dict, categories=("pillar", "barrel")) -> Path:
    """A COCO file over blank PNGs: `{(width, height): [(category_id, [x, y, w, h], bug), ...]}`."""
    import json

    images, annotations = [], []
    for i, ((w, h), anns) in enumerate(boxes_by_image.items(), start=1):
        _png(folder / "images" / f"{i}.png", w, h)
        images.append({"id": i, "file_name": f"images/{i}.png", "width": w, "height": h})
        for cat, bbox, bug in anns:
            annotations.append({"id": len(annotations) + 1, "image_id": i, "category_id": cat, "bbox": bbox,
                                "area": bbox[2] * bbox[3], "iscrowd": 0, "attributes": {"bug": bug}})
    doc = {"images": images, "annotations": annotations,
           "categories": [{"id": i + 1, "name": n} for i, n in enumerate(categories)]}
    (folder / "labels.json").write_text(json.dumps(doc))
    return folder / "labels.json"


def test_anchors_fitted_to_hand_made_boxes_of_two_image_sizes(tmp_path):
    """Scaled to 128 px (320×240 by 0.4, 160×120 by 0.8) the six boxes have sides 2, 4, 6, 8,
    10, 12 px: the six equal-count bins' medians are the quantiles at 1/12, 3/12 … 11/12
    (numpy's linear rule: 2 + 2·5/12, 4 + 2·0.25, 6 + 2·(1/12), 8 − 2/12, 8 + 2·0.75, 10 + 2·(7/12)),
    and the aspects h/w (1, 1, 4, 1, 2, 2) give quantiles 1, 1.5, 2 + 2/6 at 1/6, 3/6, 5/6."""
    from playtester.perception.compact_backbone import anchors_for_coco

    labels = _hand_made_coco(tmp_path, {
        (320, 240): [(1, [0, 0, 5, 5], "none"), (1, [10, 10, 10, 10], "none"), (2, [50, 50, 7.5, 30], "stretched")],
        (160, 120): [(2, [0, 0, 10, 10], "none"), (1, [20, 20, 12.5 / 1.41421356, 25 / 1.41421356], "none"),
                     (2, [40, 40, 15 / 1.41421356, 30 / 1.41421356], "lowres")],
    })
    coco = load_coco(labels)
    assert [int(b.sum()) for b in (im.bugged for im in coco.images)] == [1, 1]
    sizes, ratios = anchors_for_coco(coco, 128)
    assert sizes == [[2.83, 4.5, 6.17], [7.83, 9.5, 11.17]]
    assert ratios == [1.0, 1.5, 2.33]


def test_config_checks_name_the_option():
    with pytest.raises(UserError, match="--backbone 'vgg'"):
        DetectorConfig(classes=CLASSES, backbone="vgg")
    with pytest.raises(UserError, match="--trainable-layers 7"):
        DetectorConfig(classes=CLASSES, backbone="mobilenet", trainable_layers=7)
    assert DetectorConfig(classes=CLASSES).trainable_layers == 0  # pretrained: heads only (few-shot)
    assert DetectorConfig(classes=CLASSES, pretrained="none").trainable_layers == 5


def test_frozen_backbone_trains_only_fpn_and_heads():
    det = Detector(DetectorConfig(classes=CLASSES, backbone="mobilenet", pretrained="none", trainable_layers=0))
    assert not any(p.requires_grad for p in det.model.backbone.body.parameters())
    assert all(p.requires_grad for p in det.model.backbone.fpn.parameters())
    assert all(p.requires_grad for p in det.model.roi_heads.parameters())
    assert det.model.roi_heads.box_predictor.cls_score.out_features == 5  # 4 classes + background


def test_missing_coco_weights_name_pretrained_none():
    cfg = DetectorConfig(classes=CLASSES, backbone="mobilenet", pretrained="coco")
    from torch.hub import get_dir

    from playtester.perception.detector import _coco_weights

    if os.path.exists(os.path.join(get_dir(), "checkpoints", _coco_weights("mobilenet").url.rsplit("/", 1)[-1])):
        pytest.skip("COCO weights are cached here")
    with pytest.raises(UserError, match="--pretrained none"):
        Detector(cfg).load_pretrained()


@pytest.mark.parametrize("backbone", ["mobilenet", "compact"])
def test_checkpoint_round_trip_gives_identical_outputs(shots, tmp_path, backbone):
    from playtester.datasets.detection import DetectionDataModule
    from playtester.perception.compact_backbone import anchors_for_coco
    from playtester.perception.training import make_trainer, save_checkpoint_atomic

    torch.manual_seed(0)
    dm = DetectionDataModule(shots / "labels.json", batch_size=2)
    dm.setup()
    anchors = {}
    if backbone == "compact":  # anchors fitted to the shots: the checkpoint must carry them
        anchors = dict(zip(("anchor_sizes", "aspect_ratios"), anchors_for_coco(dm.splits["train"], 96)))
    cfg = DetectorConfig(classes=CLASSES, backbone=backbone, pretrained="none", image_size=96, score_threshold=0.0, **anchors)
    module = DetectorModule(**asdict(cfg))
    trainer = make_trainer(name="det", logdir=tmp_path / "logs", epochs=1, progress=False, accelerator="cpu",
                           max_steps=1, limit_val_batches=0)
    trainer.fit(module, datamodule=dm)
    assert trainer.global_step == 1
    path = save_checkpoint_atomic(trainer, tmp_path / "det.ckpt")

    frames = np.stack([read_rgb(im.path) for im in dm.splits["test"].images[:2]])
    module.model.eval()
    # load_detector keeps the backbone in channels_last (its kernels add up in another order):
    # the same layout here, so that the outputs must be bit-identical
    module.model.model.backbone.to(memory_format=torch.channels_last)
    # few detections from a barely trained model: compare the raw outputs too
    want = module.model.predict(frames, score_threshold=0.0)
    loaded = load_detector(path)
    got = loaded.predict(frames, score_threshold=0.0)
    assert loaded.classes == CLASSES and loaded.config == module.model.config
    generator = loaded.model.rpn.anchor_generator
    if backbone == "compact":
        assert [list(s) for s in generator.sizes] == anchors["anchor_sizes"]
        assert list(generator.aspect_ratios[0]) == anchors["aspect_ratios"]
    for (b1, l1, s1), (b2, l2, s2) in zip(want, got):
        assert np.array_equal(b1, b2) and np.array_equal(l1, l2) and np.array_equal(s1, s2)
    x = torch.rand(1, 3, 96, 128)
    with torch.no_grad():
        f1, f2 = module.model.model.backbone(x), loaded.model.backbone(x)
    assert all(torch.equal(f1[k], f2[k]) for k in f1)
    # Lightning's own loader rebuilds it too, from the saved config alone
    again = DetectorModule.load_from_checkpoint(path, map_location="cpu").model.eval()
    again.model.backbone.to(memory_format=torch.channels_last)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(again.predict(frames, 0.0), want))


def test_batchnorm_statistics_are_set_anew_as_the_plain_average_over_the_batches():
    """Batches [1, 3] and [5, 7] of one channel: batch means 2 and 6, unbiased variances 2 and 2,
    so the running mean is 4 and the running variance 2 (a moving average with momentum 0.1 from
    0 and 1 would give 0.98 and 1.0); the momentum and the training mode are put back, and a third
    batch beyond the limit is not seen."""
    from playtester.perception.training import recompute_batchnorm

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.BatchNorm1d(1)

        def forward(self, images, targets):
            assert all("boxes" in t for t in targets)  # run as in training: with the targets
            return self.norm(torch.stack(images))

    model = Model().eval()
    batches = [([torch.tensor([v]) for v in values], [{"boxes": torch.zeros(0, 4), "id": 3}] * 2)
               for values in ((1.0, 3.0), (5.0, 7.0), (100.0, 200.0))]
    assert recompute_batchnorm(model, batches, limit=2) == 2
    assert model.norm.running_mean.item() == pytest.approx(4.0) and model.norm.running_var.item() == pytest.approx(2.0)
    assert model.norm.momentum == 0.1 and not model.training
    assert recompute_batchnorm(torch.nn.Linear(2, 2), batches, limit=2) == 0  # nothing to set


@pytest.mark.slow
def test_fine_tuned_detector_beats_the_untrained_one_on_held_out_shots(shots, tmp_path, capsys):
    """Without COCO weights (none can be downloaded here) the model learns from scratch, and 49
    steps (a few CPU minutes; fewer than the 50 between validations, so none runs before the end)
    move its held-out loss long before its AP: the test checks the loss, the AP table is printed
    (docs/benchmarks/detector.md has AP after the default budget)."""
    torch.set_num_threads(2)
    out = tmp_path / "detector.ckpt"
    code = main(["train", "detector", "--coco", str(shots / "labels.json"), "--out", str(out), "--backbone", "mobilenet",
                 "--pretrained", "none", "--image-size", "128", "--batch-size", "4", "--lr", "2e-3", "--steps", "49",
                 "--logdir", str(tmp_path / "logs")])
    assert code == 0 and out.exists()
    assert "AP50" in capsys.readouterr().out  # the command prints its test table
    assert list((tmp_path / "logs" / "detector").glob("version_*/events.out.tfevents.*"))

    trained = load_detector(out)
    coco = load_coco(shots / "labels.json", classes=trained.classes)
    test = held_out(coco, trained.config)
    assert 0.1 * len(coco.images) <= len(test.images) <= 0.2 * len(coco.images)
    torch.manual_seed(0)
    untrained = Detector(trained.config)
    before, after = detection_loss(untrained, test), detection_loss(trained, test)
    print(f"held-out detection loss: untrained {before:.3f}, trained {after:.3f}")
    assert after < 0.7 * before, (before, after)

    # eval detector prints the table from the checkpoint alone, the same as evaluate_detector
    code = main(["eval", "detector", "--ckpt", str(out), "--coco", str(shots / "labels.json"), "--json", str(tmp_path / "ap.json")])
    assert code == 0
    import json

    table = json.loads((tmp_path / "ap.json").read_text())
    assert list(table["classes"]) == CLASSES and table["images"] == len(test.images)
    assert table["all"]["ap50"] == pytest.approx(evaluate_detector(trained, test).map50)


@pytest.fixture(scope="module")
def auto_run(shots, tmp_path_factory):
    """`train detector` with its defaults (`--pretrained auto`) for one epoch on 120 of the shots,
    every third scaled up to 320×240 (images of mixed sizes): `(folder, labels, checkpoint, output)`."""
    import json

    import cv2

    folder = tmp_path_factory.mktemp("auto")
    doc = json.loads((shots / "labels.json").read_text())
    images = doc["images"][:120]
    keep = {im["id"] for im in images}
    big = {im["id"] for im in images[::3]}
    for im in images:
        rgb = cv2.imread(str(shots / im["file_name"]))
        if im["id"] in big:
            rgb = cv2.resize(rgb, (320, 240), interpolation=cv2.INTER_NEAREST)
            im["width"], im["height"] = 320, 240
        (folder / im["file_name"]).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(folder / im["file_name"]), rgb)
    anns = [a for a in doc["annotations"] if a["image_id"] in keep]
    for a in anns:
        if a["image_id"] in big:
            a["bbox"] = [2 * v for v in a["bbox"]]
            a["area"] = a["bbox"][2] * a["bbox"][3]
    labels = folder / "labels.json"
    labels.write_text(json.dumps({**doc, "images": images, "annotations": anns}))
    ckpt = folder / "detector.ckpt"
    import contextlib
    import io

    output = io.StringIO()  # rich consoles write to whatever sys.stdout / sys.stderr is at the time
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        code = main(["train", "detector", "--coco", str(labels), "--out", str(ckpt), "--epochs", "1", "--threads", "1",
                     "--logdir", str(folder / "logs")])
    assert code == 0, output.getvalue()
    return folder, labels, ckpt, " ".join(output.getvalue().split())


def test_pretrained_auto_trains_the_compact_backbone_and_the_checkpoint_says_so(auto_run):
    from playtester.tester.object_source import describe_detector
    from playtester.perception.compact_backbone import anchors_for_coco
    from playtester.perception.detector import coco_weights_cached

    folder, labels, ckpt, output = auto_run
    steps = -(-(120 - len(held_out(load_coco(labels), load_detector(ckpt).config).images)) // 8)
    assert f"{steps} optimizer steps (--epochs 1) are too few for a detector to learn" in output
    assert re.search(r"split: \d+ images trained \(pillar \d+, barrel \d+, tire \d+, chair \d+ boxes\), \d+ held out", output)
    if coco_weights_cached("resnet50") is None:
        assert "--pretrained auto: no COCO weights for resnet50 in torchvision's cache; training the compact backbone " \
               "from random init instead" in output
    assert "images of 2 sizes (320×240, 160×120)" in output
    raw = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert raw["playtester"]["pretrained_used"] == "compact, random init"
    scored = raw["playtester"]["held_out"]
    assert list(scored["classes"]) == CLASSES and 0.0 <= scored["map50"] <= 1.0
    for row in scored["classes"].values():  # the bootstrap interval holds the AP50 it is about
        lo, hi = row["ap50_interval"]
        assert lo <= row["ap50"] + 0.01 and row["ap50"] <= hi + 0.01  # torchmetrics rounds boxes to float32
    assert describe_detector(ckpt) == f"detector {ckpt}, AP50 {100 * scored['map50']:.0f} % on its held-out shots"
    detector = load_detector(ckpt)  # the checkpoint alone rebuilds the compact model and its fitted anchors
    cfg = detector.config
    assert cfg.backbone == "compact" and cfg.pretrained == "none" and cfg.schedule == "cosine"
    coco = load_coco(labels, classes=detector.classes)
    train = detector_splits(coco, cfg.split, cfg.split_seed, cfg.held_out_boxes)["train"]
    assert (cfg.anchor_sizes, cfg.aspect_ratios) == tuple(anchors_for_coco(train, cfg.image_size))
    assert [list(s) for s in detector.model.rpn.anchor_generator.sizes] == cfg.anchor_sizes
    test = held_out(coco, cfg)
    assert scored["map50"] == pytest.approx(evaluate_detector(detector, test).map50, abs=1e-6)


def test_eval_detector_json_holds_per_class_and_variant_tables(auto_run, tmp_path):
    import json

    folder, labels, ckpt, _ = auto_run
    out = tmp_path / "ap.json"
    assert main(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(labels), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    detector = load_detector(ckpt)
    coco = load_coco(labels, classes=detector.classes)
    test = held_out(coco, detector.config)
    table = evaluate_detector(detector, test)
    assert list(doc["classes"]) == CLASSES and doc["images"] == len(test.images)
    for name, ap50, ap, n in zip(CLASSES, table.ap50, table.ap, table.boxes):
        row = doc["classes"][name]
        assert set(row) == {"ap50", "ap", "boxes"} and row["boxes"] == n
        assert row["ap50"] == (None if np.isnan(ap50) else pytest.approx(ap50))
        assert row["ap"] == (None if np.isnan(ap) else pytest.approx(ap))
    assert doc["all"] == {"ap50": pytest.approx(table.map50), "ap": pytest.approx(table.map), "boxes": sum(table.boxes)}
    bugged = [int(im.bugged.sum()) for im in test.images]
    variants = doc["variants"]  # the park's shots mark their bugged boxes: scored apart too
    assert variants["bugged"]["all"]["boxes"] == sum(bugged)
    assert variants["healthy"]["all"]["boxes"] + sum(bugged) == doc["all"]["boxes"]


def test_eval_detector_refuses_a_class_it_does_not_know_in_one_line(auto_run, tmp_path, capsys):
    import json

    folder, labels, ckpt, _ = auto_run
    doc = json.loads(labels.read_text())
    doc["categories"][3]["name"] = "lamp"
    other = folder / "lamp.json"
    other.write_text(json.dumps(doc))
    out = tmp_path / "ap.json"
    assert main(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(other), "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert "boxes of 'lamp', which detector" in err and "does not know" in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_ap_table_scores_variants_and_sizes_apart(tmp_path):
    """Hand-made: one image (320×240, scaled by 0.4 to 128 px) with a healthy 40×40 pillar (16 px
    at the input), a bugged 10×10 pillar (4 px) and a healthy 30×30 barrel; one detection, exactly
    on the big pillar. Over all boxes the pillar is found at recall 1/2 with precision 1: COCO's
    101-point AP is 51/101; the barrel, never detected, scores 0. Only healthy boxes, or only
    boxes of at least 6 px: the pillar scores 1. Only bugged: the small pillar is missed (0)."""
    from playtester.perception.detector_eval import ap_table

    labels = _hand_made_coco(tmp_path, {(320, 240): [(1, [10, 10, 40, 40], "none"), (1, [200, 100, 10, 10], "stretched"),
                                                     (2, [100, 150, 30, 30], "none")]})
    coco = load_coco(labels)
    preds = [{"boxes": torch.tensor([[10.0, 10.0, 50.0, 50.0]]), "scores": torch.tensor([0.9]), "labels": torch.tensor([1])}]
    every = ap_table(preds, coco)
    assert every.boxes == [2, 1] and every.ap50 == [pytest.approx(51 / 101), 0.0]
    healthy, bugged = ap_table(preds, coco, "healthy"), ap_table(preds, coco, "bugged")
    assert healthy.boxes == [1, 1] and healthy.ap50 == [pytest.approx(1.0), 0.0]
    assert bugged.boxes == [1, 0] and bugged.ap50[0] == 0.0 and np.isnan(bugged.ap50[1])
    large = ap_table(preds, coco, min_side=6, image_size=128)
    assert large.boxes == [1, 1] and large.ap50 == [pytest.approx(1.0), 0.0]
    assert ap_table(preds, coco, min_side=3, image_size=128).boxes == [2, 1]


def test_a_detection_on_a_crowd_box_counts_neither_way(tmp_path):
    """Hand-made: one 40×40 pillar and one pillar marked crowd (too small to ask for). Two
    detections: the higher-scored one on the crowd box, the other on the pillar. Were the crowd
    detection a false positive, the pillar would come at rank 2 with precision 1/2 (AP50 1/2);
    ignored, AP50 is 1. The crowd box is not a training box either."""
    from playtester.perception.detector_eval import ap_table

    labels = _hand_made_coco(tmp_path, {(320, 240): [(1, [10, 10, 40, 40], "none"), (1, [200, 100, 8, 8], "none")]})
    doc = json.loads(labels.read_text())
    doc["annotations"][1]["iscrowd"] = 1
    labels.write_text(json.dumps(doc))
    coco = load_coco(labels)
    [im] = coco.images
    assert im.boxes.tolist() == [[10, 10, 50, 50]] and im.crowd_boxes.tolist() == [[200, 100, 208, 108]]
    assert coco.counts() == {"pillar": 1, "barrel": 0}
    preds = [{"boxes": torch.tensor([[200.0, 100.0, 208.0, 108.0], [10.0, 10.0, 50.0, 50.0]]),
              "scores": torch.tensor([0.95, 0.9]), "labels": torch.tensor([1, 1])}]
    table = ap_table(preds, coco)
    assert table.boxes[0] == 1 and table.ap50[0] == pytest.approx(1.0)
    doc["annotations"][1]["iscrowd"] = 0  # the same detections, the small box a real one: both found
    labels.write_text(json.dumps(doc))
    assert ap_table(preds, load_coco(labels)).boxes[0] == 2


def test_coco_writer_marks_boxes_under_min_box_as_crowd(tmp_path):
    """sqrt(w·h) against min_box 15: 20×20 (20) is kept, 30×5 (12.2) and 10×10 (10) are crowd,
    and only the kept box is counted."""
    from playtester.datasets.coco import CocoWriter

    writer = CocoWriter(tmp_path / "shots")
    objects = [{"class": "tire", "box": [0, 0, 20, 20]}, {"class": "tire", "box": [40, 40, 70, 45]},
               {"class": "barrel", "box": [100, 100, 110, 110]}]
    writer.add(np.zeros((120, 160, 3), np.uint8), objects, min_box=15)
    path = writer.close()
    assert [a["iscrowd"] for a in json.loads(path.read_text())["annotations"]] == [0, 1, 1]
    assert writer.counts["tire"] == 1 and writer.counts["barrel"] == 0


def test_framing_keeps_a_small_class_within_min_box():
    """Five uncut views of 30 px at 100 units give size × distance = 3000: with min_box 15 the
    object is 15 px at 200 units, so shots are drawn from [near 90, 200]; before five views, from
    the whole range. A view cut by the screen's edge tells nothing."""
    from playtester.commands.scenario import Framing

    rng = np.random.default_rng(0)
    framing = Framing(90.0, 520.0, 15)
    framing.saw({"box": [0, 50, 30, 80]}, 100.0, 320)  # touches the left edge
    for _ in range(4):
        framing.saw({"box": [100, 50, 130, 80]}, 100.0, 320)
    assert max(framing.distance(rng) for _ in range(200)) > 400
    framing.saw({"box": [100, 50, 130, 80]}, 100.0, 320)
    drawn = [framing.distance(rng) for _ in range(200)]
    assert 90 <= min(drawn) and max(drawn) <= 200 and max(drawn) > 180


def _encoder_checkpoint(path: Path, trunk: str) -> "torch.nn.Module":
    """An untrained encoder of `trunk` saved in the checkpoint format `train encoder` writes."""
    from playtester.perception.encoder import InverseDynamicsModule
    from playtester.perception.training import tag_checkpoint

    module = InverseDynamicsModule(action_names=["forward", "turn_left", "turn_right"], trunk=trunk, pretrained="none",
                                   image_size=64, feature_dim=32)
    ckpt = {"state_dict": {f"model.{k}": v for k, v in module.model.state_dict().items()},
            "hyper_parameters": dict(module.hparams)}
    tag_checkpoint(ckpt, "encoder")
    torch.save(ckpt, path)
    return module.model


def test_an_encoder_with_the_compact_trunk_starts_the_detectors_body(tmp_path):
    """Domain pretraining: `--pretrained ENCODER.ckpt` copies the encoder's compact body into
    the detector's body, tensor for tensor; the FPN keeps its own init and everything trains.
    An AlexNet-trunk encoder cannot start it: one line that says what can."""
    idm = _encoder_checkpoint(tmp_path / "enc.ckpt", "compact")
    module = DetectorModule(**asdict(DetectorConfig(classes=["pillar", "barrel"], backbone="compact", pretrained=str(tmp_path / "enc.ckpt"))))
    fresh = DetectorModule(**asdict(DetectorConfig(classes=["pillar", "barrel"], backbone="compact", pretrained="none")))
    assert "inverse-dynamics encoder" in module.model.load_pretrained()
    body, source = module.model.model.backbone.body.state_dict(), idm.encoder.trunk.body.state_dict()
    assert body.keys() == source.keys() and all(torch.equal(body[k], source[k]) for k in body)
    assert not all(torch.equal(body[k], fresh.model.model.backbone.body.state_dict()[k]) for k in body)
    assert module.model.frozen_fraction == 0.0 and module.config.trainable_layers == 4
    _encoder_checkpoint(tmp_path / "alex.ckpt", "alexnet")
    alex = DetectorModule(**asdict(DetectorConfig(classes=["pillar"], backbone="compact", pretrained=str(tmp_path / "alex.ckpt"))))
    with pytest.raises(UserError, match="--trunk compact"):
        alex.model.load_pretrained()


def _one_box_images(counts: dict[int, int]):
    """`counts[label]` images of one 5×5 box of that label each."""
    from playtester.datasets.detection import CocoImage, CocoSet

    labels = [label for label, n in counts.items() for _ in range(n)]
    images = [CocoImage(i, Path("x"), "x", 10, 10, np.array([[0, 0, 5, 5]], np.float32), np.array([label])) for i, label in enumerate(labels)]
    return CocoSet(Path("x"), ["a", "b"], images)


@pytest.mark.parametrize("counts, held", [({1: 40, 2: 100}, (8, 20)), ({1: 100, 2: 100}, (15, 15)), ({1: 200, 2: 400}, (20, 40))])
def test_held_out_split_adapts_to_the_rarest_class(counts, held):
    """Held out: the share that gives the rarest class 15 boxes, within 10–20 %: 15/40 is over
    20 % (8 of 40 and 20 of 100 held out); 15/100 = 15 %; 15/200 is under 10 % (20 and 40)."""
    coco = _one_box_images(counts)
    splits = detector_splits(coco, "held-out", seed=1)
    assert splits["val"] is splits["test"]
    got = tuple(int((np.concatenate([im.labels for im in splits["test"].images]) == c).sum()) for c in (1, 2))
    assert got == held
    assert len(splits["train"].images) + len(splits["test"].images) == len(coco.images)
    assert not {im.id for im in splits["train"].images} & {im.id for im in splits["test"].images}
    every = detector_splits(coco, "none")
    assert len(every["train"].images) == len(coco.images) and not every["test"].images


def test_stalled_counts_validations_since_the_last_rise():
    """Rises of more than 0.005 over the best so far: 0.10 → 0.20 (at index 2) → 0.204 is none
    (under 0.005), so two validations after the last rise; three are needed with patience 3."""
    from playtester.perception.training import stalled

    assert not stalled([0.0, 0.1, 0.2, 0.204, 0.19], patience=3, min_rise=0.005)
    assert stalled([0.0, 0.1, 0.2, 0.204, 0.19, 0.203], patience=3, min_rise=0.005)
    assert not stalled([0.0, 0.0, 0.0, 0.0, 0.3], patience=3, min_rise=0.005)
    assert stalled([0.0, 0.0, 0.0, 0.0], patience=3, min_rise=0.005)  # never rose: stalled from the start
    assert not stalled([0.5, 0.4, 0.3], patience=3, min_rise=0.005)  # too few to say


def test_training_says_when_it_stopped_early_or_was_still_rising():
    """(step, mAP, mAP50) histories: a plateau stopped at step 700 of 1000 names its best; a
    full run that rose 0.03 over its last 3 validations says more steps would help; one that rose
    0.01 says nothing; --max-minutes cutting at 150 steps says too few."""
    from playtester.perception.recipes import DetectorRecipe, after_training

    r = DetectorRecipe(coco=Path("x.json"), out=Path("x.ckpt"))
    plateau = [(100 * i, m, m) for i, m in enumerate([0.1, 0.3, 0.40, 0.41, 0.409, 0.408, 0.41], start=1)]
    [line] = after_training(r, 700, 1000, plateau)
    assert line.startswith("stopped at step 700 of 1000") and "best 0.410 at step 400" in line
    rising = [(100 * i, m, m) for i, m in enumerate([0.1, 0.3, 0.40, 0.42, 0.43, 0.44, 0.45], start=1)]
    [line] = after_training(r, 700, 700, rising)
    assert "still rising at the end (+0.030 over the last 300 steps, to 0.450)" in line and "--steps 1400" in line
    flat = [(100 * i, m, m) for i, m in enumerate([0.1, 0.3, 0.40, 0.44, 0.445, 0.448, 0.45], start=1)]
    assert after_training(r, 700, 700, flat) == []
    cut = DetectorRecipe(coco=Path("x.json"), out=Path("x.ckpt"), max_minutes=1)
    [line] = after_training(cut, 150, 1000, rising[:1])
    assert line.startswith("--max-minutes 1 stopped training after 150 of 1000 steps, too few to learn")


def test_training_names_classes_with_too_few_boxes_to_score_or_to_learn():
    """Under 5 held-out boxes a class cannot be scored, under 20 trained boxes it learns poorly:
    one line each, naming the classes and their counts; none where every class has enough."""
    from playtester.perception.recipes import box_warnings

    scant, few = box_warnings({"pillar": 30, "tire": 9}, {"pillar": 15, "tire": 2})
    assert scant == ("held-out boxes of tire (2) are too few to score it (under 5 a class, an AP says little): label more "
                     "shots, or give --val-coco with more")
    assert few.startswith("few training boxes of tire (9): a class learns from about 25")
    [scant] = box_warnings({"pillar": 30, "tire": 25}, {"pillar": 4, "tire": 0})
    assert scant.startswith("held-out boxes of pillar (4), tire (0) are too few to score them")
    assert box_warnings({"pillar": 20, "tire": 25}, {"pillar": 5, "tire": 15}) == []
    assert box_warnings({"pillar": 20}, {}) == []  # nothing held out (--val-coco scores it)


def test_ap_table_shows_no_interval_for_a_class_with_too_few_boxes(capsys):
    """The printed table's interval column: the interval where a class has 5 boxes or more, "too
    few boxes" under 5, "–" for a class with none."""
    from playtester.commands.perception import _print_ap_table
    from playtester.perception.detector_eval import APTable

    nan = float("nan")
    table = APTable(["pillar", "tire", "chair"], [0.9, 1.0, nan], [0.5, 0.6, nan], 0.95, 0.55, 10, [12, 3, 0],
                    [(0.8, 1.0), (1.0, 1.0), (nan, nan)])
    _print_ap_table(table, "held-out AP")
    rows = {line.split()[1]: " ".join(line.split()) for line in capsys.readouterr().out.splitlines() if line.startswith("│")}
    assert rows["pillar"].endswith("80.0 % – 100.0 % │")
    assert rows["tire"].endswith("too few boxes (< 5) │")
    assert rows["chair"].endswith("– │") and "%" not in rows["chair"]


def test_ap101_against_hand_worked_values():
    """Scores 0.9 (hit), 0.8 (miss), 0.7 (hit) against 3 boxes: precision 1 up to recall 1/3,
    2/3 up to 2/3, nothing beyond: COCO's 101 recall points give (34·1 + 33·2/3) / 101 = 56/101.
    The first detection counted twice (its image drawn twice) against 4 boxes: precision 1 to
    recall 1/2, 3/4 at 3/4: (51 + 25·3/4) / 101. A detection matched to a crowd box counts
    neither way."""
    from playtester.perception.detector_eval import _ap101

    scores, hit = np.array([0.9, 0.8, 0.7]), np.array([True, False, True])
    assert _ap101(scores, hit, np.zeros(3, bool), np.ones(3), 3) == pytest.approx(56 / 101)
    assert _ap101(scores, hit, np.zeros(3, bool), np.array([2.0, 1, 1]), 4) == pytest.approx((51 + 25 * 0.75) / 101)
    assert _ap101(scores, hit, np.array([False, True, False]), np.ones(3), 2) == pytest.approx(1.0)
    assert np.isnan(_ap101(scores, hit, np.zeros(3, bool), np.ones(3), 0))


def test_bootstrap_interval_over_two_images(tmp_path):
    """Two images of one pillar each, found in the first only. Drawing two images with replacement
    gives the first twice (AP50 1, chance 1/4), the second twice (0, 1/4) or one of each (recall
    1/2 at precision 1: 51/101, 1/2): the 90 % interval is 0 to 1, the 40 % one 51/101 to 51/101."""
    from playtester.perception.detector_eval import ap50_intervals

    labels = _hand_made_coco(tmp_path, {(320, 240): [(1, [10, 10, 40, 40], "none")], (160, 120): [(1, [20, 20, 30, 30], "none")]})
    coco = load_coco(labels)
    preds = [{"boxes": torch.tensor([[10.0, 10.0, 50.0, 50.0]]), "scores": torch.tensor([0.9]), "labels": torch.tensor([1])},
             {"boxes": torch.zeros(0, 4), "scores": torch.zeros(0), "labels": torch.zeros(0, dtype=torch.int64)}]
    wide = ap50_intervals(preds, coco)
    assert wide[0] == (0.0, 1.0) and all(np.isnan(v) for v in wide[1])  # no barrel boxes
    assert ap50_intervals(preds, coco, level=0.4)[0] == (pytest.approx(51 / 101), pytest.approx(51 / 101))


@pytest.mark.slow
def test_val_coco_holds_out_another_file_and_every_training_image_trains(shots, tmp_path, capsys):
    """Train on 40 of the shots, held out: 20 others given as --val-coco (their own file, in
    another order of ids). The split line says so, the checkpoint's held-out score is on those
    20, and `eval detector --split test` on the training file says there is no held-out part."""
    doc = json.loads((shots / "labels.json").read_text())

    def part(name: str, images: list) -> Path:
        ids = {im["id"] for im in images}
        folder = tmp_path / name
        folder.mkdir()
        (folder / "images").symlink_to(shots / "images")
        cats = doc["categories"][::-1] if name == "val" else doc["categories"]
        return _write_doc(folder, {**doc, "categories": cats, "images": images,
                                   "annotations": [a for a in doc["annotations"] if a["image_id"] in ids]})

    train, val = part("train", doc["images"][:40]), part("val", doc["images"][40:60])
    out = tmp_path / "det.ckpt"
    assert main(["train", "detector", "--coco", str(train), "--val-coco", str(val), "--out", str(out), "--steps", "2",
                 "--threads", "1", "--logdir", str(tmp_path / "logs")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "split: all 40 images trained" in said and f"held out: the 20 images of --val-coco {val}" in said
    assert "2 optimizer steps (--steps 2) are too few for a detector to learn" in said
    raw = torch.load(out, map_location="cpu", weights_only=False)
    assert raw["hyper_parameters"]["split"] == "none" and raw["playtester"]["held_out"]["images"] == 20
    assert main(["eval", "detector", "--ckpt", str(out), "--coco", str(train)]) == 2
    assert "trained on every image of its training file" in " ".join(capsys.readouterr().err.split())
    assert main(["eval", "detector", "--ckpt", str(out), "--coco", str(val), "--split", "all"]) == 0


def _write_doc(folder: Path, doc: dict) -> Path:
    (folder / "labels.json").write_text(json.dumps(doc))
    return folder / "labels.json"


def test_predict_leaves_the_detector_in_the_mode_it_found_it(tiny_detector, monkeypatch):
    """A run's detector stays in eval mode, and predict does not switch it again (each switch walks
    its ~100 modules: about 0.5 ms a call); one in training predicts in eval mode and goes back to
    training; both give the same boxes."""
    import torch

    from playtester.perception.detector import load_detector

    detector = load_detector(tiny_detector)
    frame = np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    switches = []
    switch = torch.nn.Module.train
    monkeypatch.setattr(torch.nn.Module, "train", lambda self, mode=True: switches.append(mode) or switch(self, mode))
    evaluated = detector.predict([frame])[0]
    assert switches == [] and not any(m.training for m in detector.modules())
    detector.train()
    trained = detector.predict([frame])[0]
    assert detector.training and all(m.training for m in detector.modules())
    for a, b in zip(evaluated, trained):
        np.testing.assert_allclose(a, b, atol=1e-5)
