"""Places without a map: the online clusterer against hand-worked vectors, the pixel embedding's
invariances, the run folder's record (and its resume), the report's places view from a real
tester loop on a game with no map, and a studio's map drawn as for Doom."""

import json

import numpy as np
import pytest
import yaml

from playtester.perception.places import Places, PixelEmbedding, thumbnail, unit


def test_online_places_by_hand():
    places = Places(threshold=0.1)
    a = unit(np.array([1.0, 0.0, 0.0]))
    near = unit(np.array([1.0, 0.3, 0.0]))   # cos = 1/sqrt(1.09) = 0.958: distance 0.042, the same place
    far = unit(np.array([1.0, 0.6, 0.0]))    # cos = 1/sqrt(1.36) = 0.857: distance 0.143, a new place
    slight = unit(np.array([1.0, 0.1, 0.0]))  # 0.005 from a, 0.096 from far
    other = unit(np.array([0.0, 0.0, 1.0]))
    assert places.visit(a) == (0, True)
    assert places.visit(near) == (0, False)
    assert places.visit(far) == (1, True)
    # near·far = 1.18 / (1.044 · 1.166) = 0.969: 0.031 from far, closer than a's 0.042: the nearest exemplar wins
    assert places.visit(near) == (1, False)
    assert places.visit(slight) == (0, False)
    assert places.visit(other) == (2, True)
    assert [p.visits for p in places.places] == [3, 2, 1]
    assert [p.first_step for p in places.places] == [0, 2, 5]
    assert places.count == 3 and places.steps == 6
    assert np.array_equal(places.places[0].vector, a), "exemplars never move"


def test_pixel_embedding_ignores_brightness_and_tells_views_apart():
    rng = np.random.default_rng(0)
    view = (rng.random((120, 160, 3)) * 200).astype(np.uint8)
    embed = PixelEmbedding()
    v = embed(view)
    assert v.shape == (16 * 12,) and np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)
    brighter = np.clip(view.astype(int) + 30, 0, 255).astype(np.uint8)
    assert 1 - float(embed(brighter) @ v) < 0.01, "the same view, lit brighter"
    other = (rng.random((120, 160, 3)) * 200).astype(np.uint8)
    assert 1 - float(embed(other) @ v) > embed.threshold, "another view"
    assert not embed(np.full((120, 160, 3), 90, np.uint8)).any(), "a flat frame has no direction: zeros"
    assert thumbnail(view).shape == (72, 96, 3)


def test_place_log_writes_places_and_a_resumed_run_goes_on(tmp_path):
    from playtester.tester.runlog import JsonlWriter, PlaceLog

    rng = np.random.default_rng(1)
    views = [(rng.random((60, 80, 3)) * 255).astype(np.uint8) for _ in range(3)]
    log = PlaceLog(tmp_path, 0, PixelEmbedding())
    traj = JsonlWriter(tmp_path / "trajectory.jsonl")
    for t, frame in enumerate([views[0], views[0], views[1]]):
        traj.write({"env": 0, "episode": 0, "t": t, "place": log.visit(frame, 0, t)})
    log.close()
    traj.close()
    records = [json.loads(line) for line in (tmp_path / "places.jsonl").read_text().splitlines()]
    assert [(r["place"], r["t"], r["first_step"], r["embedding"]) for r in records] == [(0, 0, 0, "pixels"), (1, 2, 2, "pixels")]
    assert (tmp_path / records[1]["thumb"]).is_file() and records[1]["thumb"] == "places/0001.png"
    resumed = PlaceLog(tmp_path, 0, PixelEmbedding())
    assert resumed.places.count == 2 and resumed.places.steps == 3
    assert resumed.visit(views[1], 1, 0) == 1, "an old view is its old place"
    assert resumed.visit(views[2], 1, 1) == 2
    assert json.loads((tmp_path / "places.jsonl").read_text().splitlines()[-1])["first_step"] == 4
    resumed.close()
    other = PlaceLog(tmp_path, 1, PixelEmbedding())  # a second instance: its own places, its own thumbnails
    assert other.visit(views[0], 1, 0) == 0
    assert (tmp_path / "places" / "e1-0000.png").is_file()
    other.close()


@pytest.mark.slow
def test_a_run_with_no_map_reports_its_places(small_park, tmp_path):
    """A real tester loop on the small park with its telemetry taken away and its map unknown to the
    report (the game named as a window game would be): places in the log, tests and findings placed."""
    from conftest import TelemetryStripped
    from playtester.capture.games import make_game
    from playtester.report.build import build_report
    from playtester.bugs.oracles import Finding
    from playtester.tester.loop import TesterEnv
    from playtester.tester.runlog import JsonlWriter, PlaceLog, read_jsonl

    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump({"game": "window:Park", "agent": "random explorer"}))
    class FindsAtStep20:  # an oracle that fires once, at a known step
        def reset(self):
            pass

        def observe(self, frame, info, action, episode, step):
            return [Finding("assertion", "step 20", episode, step, {})] if (episode, step) == (1, 20) else []

    env = TesterEnv(TelemetryStripped(make_game(small_park)), tester=None, detector=None, oracles=[FindsAtStep20()],
                    run_dir=out, game="window:Park", places=PlaceLog(out, 0, PixelEmbedding()))
    rng = np.random.default_rng(0)
    for _ in range(2):
        env.reset(seed=3)
        for t in range(40):
            env.step(int(rng.integers(env.action_space.n)))
    env.close()
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert all("place" in r for r in rows) and len({r["place"] for r in rows}) > 1
    # a test made at episode 1, step 10 (where the tester loop would log it)
    JsonlWriter(out / "tests.jsonl").write({"env": 0, "episode": 1, "step": 10, "ooi": "chair@1:10", "kind": "chair",
                                            "steps": 5, "jsd": 0.1, "success": True, "texture": None})
    build_report(out)
    summary = json.loads((out / "summary.json").read_text())
    places = len({r["place"] for r in rows})
    assert summary["places"]["places"] == places and summary["places"]["embedding"] == "pixels"
    assert (out / "places.png").is_file()
    html = (out / "report.html").read_text()
    assert f"<h2>Places ({places})</h2>" in html and "a pixel embedding" in html
    at_test = next(r["place"] for r in rows if r["episode"] == 1 and r["t"] == 10)
    card = html.split(f'data-place="{at_test}">')[1].split("</div>")[0]
    assert "test chair chair@1:10: passed" in card
    finding = json.loads(next((out / "findings").glob("*/finding.json")).read_text())
    assert (finding["episode"], finding["step"]) == (1, 20)
    at_finding = next(r["place"] for r in rows if r["episode"] == finding["episode"] and r["t"] == finding["step"])
    assert f'class="place found" data-place="{at_finding}"' in html
    assert "finding 0000: assertion" in html.split(f'data-place="{at_finding}">')[1].split("</div>")[0]


def test_a_studio_map_is_drawn_as_for_doom(tmp_path):
    """`run window --map --map-bounds` with telemetry: visited cells shaded on the studio's map,
    the share of the map covered per episode and over the run, the legend saying so."""
    import cv2

    from playtester.report.build import build_report
    from playtester.report.maps import VISITED
    from playtester.tester.runlog import JsonlWriter

    cv2.imwrite(str(tmp_path / "map.png"), np.full((100, 200, 3), 200, np.uint8))
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump({"game": "window:Studio", "agent": "random explorer",
                                                     "map": str(tmp_path / "map.png"), "map_bounds": [0, 0, 400, 200]}))
    traj = JsonlWriter(out / "trajectory.jsonl")
    # 40 columns of 10 units: episode 0 walks x 5..95 along y 5 (10 cells), episode 1 x 5..45 (5 of them again)
    for episode, xs in enumerate([range(5, 100, 10), range(5, 50, 10)]):
        for t, x in enumerate(xs):
            traj.write({"env": 0, "episode": episode, "t": t, "action": 0, "mode": "explore", "ooi": None, "position": [x, 5.0]})
    traj.close()
    build_report(out)
    cov = json.loads((out / "summary.json").read_text())["coverage"]
    cells = 40 * 20
    assert cov["area_share_per_episode"] == pytest.approx([10 / cells, 5 / cells])
    assert cov["area_share_cumulative"] == pytest.approx([10 / cells, 10 / cells])
    image = cv2.cvtColor(cv2.imread(str(out / "coverage.png")), cv2.COLOR_BGR2RGB)
    shaded = np.all(np.abs(image.astype(int) - (0.45 * np.array(VISITED) + 0.55 * 200)) <= 2, axis=-1)
    assert shaded.any(), "visited cells shaded"
    assert shaded[image.shape[0] // 2:].any() and not shaded[: image.shape[0] // 2].any(), "on the south edge, where y = 5"
    html = (out / "report.html").read_text()
    assert "map covered in the episode" in html and "cell visited (10 × 10 map units)" in html


def test_encoder_embedding_is_the_encoders_features_as_a_unit_vector():
    """What `scripts/bench_places.py` measures the pixels against: the frozen encoder's features
    of the whole frame at the encoder's size, by angle."""
    import torch

    from playtester.capture.frames import FrameSpec
    from playtester.perception.encoder import FeatureEncoder
    from playtester.perception.places import EncoderEmbedding

    torch.manual_seed(0)
    encoder = FeatureEncoder(feature_dim=32, trunk="compact")
    spec = FrameSpec(64, 64)
    frame = (np.random.default_rng(2).random((120, 160, 3)) * 255).astype(np.uint8)
    v = EncoderEmbedding(encoder, spec)(frame)
    with torch.no_grad():
        x = torch.from_numpy(spec.resize(frame)).permute(2, 0, 1)[None].float() / 255
        expected = encoder(x)[0].numpy()
    assert v.shape == (32,) and v == pytest.approx(expected / np.linalg.norm(expected), abs=1e-5)


def test_two_instances_places_merge_in_the_report(tmp_path):
    """Each game instance clusters on its own; the report merges their places by their exemplars:
    the same view found by both is one place, its visits summed, first seen where it was first seen."""
    from playtester.report.places import places_view
    from playtester.tester.runlog import JsonlWriter, PlaceLog, read_jsonl

    rng = np.random.default_rng(3)
    a, b, c = [(rng.random((60, 80, 3)) * 255).astype(np.uint8) for _ in range(3)]
    traj = JsonlWriter(tmp_path / "trajectory.jsonl")
    logs = [PlaceLog(tmp_path, env, PixelEmbedding()) for env in (0, 1)]
    for env, t, frame in [(0, 0, a), (1, 0, b), (0, 1, b), (1, 1, a), (1, 2, c), (0, 2, a)]:
        traj.write({"env": env, "episode": env, "t": t, "place": logs[env].visit(frame, env, t)})
    for log in logs:
        log.close()
    traj.close()
    view = places_view(tmp_path, list(read_jsonl(tmp_path / "trajectory.jsonl")), [], [])
    assert [(card.id, card.visits, card.episode, card.t) for card in view.cards] == [(0, 3, 0, 0), (1, 2, 1, 0), (2, 1, 1, 2)]
    assert view.novel == [1, 2, 2, 2, 3, 3]
