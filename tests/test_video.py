"""Demos from gameplay video (issue 23): decoding, resampling, cropping, IDM labelling, training
beside real demos, and bad footage named in one line."""

from __future__ import annotations

import subprocess
from fractions import Fraction
from itertools import islice

import numpy as np
import pytest
import torch

from playtester.errors import UserError
from playtester.cli import main
from playtester.datasets.episodes import Episode, load_episodes
from playtester.datasets.video import control_rate_frames, fit_frame, resample_counts, write_video


def _ffmpeg() -> str:
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


def _bars(n: int, size=(320, 240)) -> list[np.ndarray]:
    """Frames with a white bar that moves 8 px a frame: each one tells which frame it is."""
    w, h = size
    frames = []
    for i in range(n):
        f = np.full((h, w, 3), 40, np.uint8)
        f[:, 8 * i % w : 8 * i % w + 16] = 230
        frames.append(f)
    return frames


# -- resampling and cropping: hand-worked ---------------------------------------------------------


def test_resampling_keeps_the_frame_on_screen_at_each_control_step():
    assert list(islice(resample_counts(30, 10), 9)) == [1, 0, 0, 1, 0, 0, 1, 0, 0]
    assert list(islice(resample_counts(35, 35 / 4), 8)) == [1, 0, 0, 0, 1, 0, 0, 0]
    assert list(islice(resample_counts(8.75, 8.75), 5)) == [1] * 5
    # NTSC to 10 steps a second: no drift over an hour of footage
    n = int(29.97 * 3600)
    kept = sum(islice(resample_counts(29.97, 10), n))
    assert kept == -(-n * Fraction(10) // Fraction(2997, 100))


def test_frames_are_centre_cropped_to_the_target_aspect_then_resized():
    wide = np.zeros((90, 160, 3), np.uint8)  # 16:9
    wide[:, :20] = 255  # the sides a 4:3 crop cuts away
    wide[:, -20:] = 255
    wide[:, 20:-20] = 100
    out = fit_frame(wide, (80, 60))
    assert out.shape == (60, 80, 3)
    assert np.all(out == 100), "the 4:3 centre keeps none of the side bars"
    tall = np.zeros((200, 100, 3), np.uint8)
    assert fit_frame(tall, (80, 60)).shape == (60, 80, 3)


def test_a_video_decodes_at_the_control_rate(tmp_path):
    frames = _bars(30)
    write_video(tmp_path / "v.mp4", frames, fps=30)
    info, decoded = control_rate_frames(tmp_path / "v.mp4", 10, (320, 240))
    decoded = list(decoded)
    assert info.fps == pytest.approx(30) and info.size == (320, 240)
    assert len(decoded) == 10
    for k, frame in enumerate(decoded):  # step k shows source frame 3k, within compression noise
        error = [np.abs(frame.astype(int) - f).mean() for f in frames]
        assert int(np.argmin(error)) == 3 * k and min(error) < 3


# -- from video to episodes, and training beside real demos ----------------------------------------


@pytest.fixture(scope="module")
def rendered(small_park, tmp_path_factory):
    """Two scripted path demos on the small park, rendered to mp4 by `demos --video`."""
    root = tmp_path_factory.mktemp("rendered")
    assert main(["demos", "--game", small_park, "--behavior", "path", "--episodes", "2", "--steps", "40",
                 "--seed", "300", "--video", "--out", str(root / "truth")]) == 0
    return root / "truth"


@pytest.mark.slow
def test_demos_from_video_turns_an_mp4_into_loadable_episodes(rendered, tiny_parts, tmp_path):
    _, encoder, _ = tiny_parts("path")
    videos = sorted(rendered.glob("*.mp4"))
    assert [v.stem for v in videos] == ["ep0000", "ep0001"]
    out = tmp_path / "video"
    assert main(["demos", "--from-video", str(videos[0]), "--idm", str(encoder), "--out", str(out),
                 "--behavior", "path", "--steps", "20", "--flag-below", "0.3"]) == 0
    episodes = load_episodes(out, strict=True)
    truth = Episode.open(rendered / "ep0000")
    assert len(truth) == 40
    assert [e.name for e in episodes] == ["ep0000-000", "ep0000-001"]
    assert [len(e) for e in episodes] == [20, 19], "every frame but the last, cut at --steps"
    frames = np.concatenate([np.asarray(e.frames) for e in episodes])
    assert frames.shape[1:] == truth.frames.shape[1:]
    step_error = np.abs(frames.astype(int) - truth.frames[: len(frames)]).mean(axis=(1, 2, 3))
    assert step_error.max() < 8, "frame t of the video is frame t of the demo (same rate, H.264 noise only)"
    for ep in episodes:
        assert ep.meta["video"]["file"] == str(videos[0]) and ep.meta["idm"]["flag_below"] == 0.3
        assert not ep.expert_driven, "footage trains only, never validates"
        for s in ep.steps:
            assert s["label_source"] == "idm" and 0 < s["confidence"] <= 1
            assert s.get("low_confidence", False) == (s["confidence"] < 0.3)
            assert s["keys"] == list(ep.keymap.keys_for(s["action"]))
    # a short piece left over after the last cut is dropped, not kept as a demo too short to learn from
    assert main(["demos", "--from-video", str(videos[1]), "--idm", str(encoder), "--out", str(tmp_path / "cut"),
                 "--behavior", "path", "--steps", "30"]) == 0
    assert [len(e) for e in load_episodes(tmp_path / "cut")] == [30]


@pytest.fixture(scope="module")
def idm_demos(rendered, tiny_parts, tmp_path_factory):
    """Both rendered videos labelled by the tiny path encoder (a folder of them)."""
    _, encoder, _ = tiny_parts("path")
    out = tmp_path_factory.mktemp("idm") / "video"
    assert main(["demos", "--from-video", str(rendered), "--idm", str(encoder), "--out", str(out), "--behavior", "path"]) == 0
    return out


@pytest.mark.slow
def test_idm_episodes_train_beside_demos_with_their_weight(idm_demos, tiny_parts, tmp_path, one_torch_thread):
    """`train policy --demos DEMOS --demos VIDEO --idm-weight W --idm-min-confidence P`: every
    video episode trains and none validates; its steps weigh W, or 0 below P."""
    from conftest import TINY_POLICY

    from playtester.imitation.data import IdmUse, collate, encode_episodes, split_demos
    from playtester.imitation.fit import fit_policy
    from playtester.imitation.training import TrainConfig
    from playtester.perception.training import read_checkpoint

    demos, encoder, _ = tiny_parts("path")
    video_eps = load_episodes(idm_demos)
    assert len(video_eps) == 2
    train, val, test = split_demos(load_episodes(demos) + video_eps, seed=0)
    names = lambda eps: {e.name for e in eps}  # noqa: E731
    assert names(video_eps) <= names(train) and not names(video_eps) & names(val + test)

    use = IdmUse(weight=0.5, min_confidence=0.2)
    trajs = encode_episodes(video_eps, lambda frames: torch.zeros(len(frames), 4), teacher=False, idm=use)
    for traj, ep in zip(trajs, video_eps):
        expected = [0.5 if s["confidence"] >= 0.2 else 0.0 for s in ep.steps]
        assert traj.weights.tolist() == expected
    batch = collate(trajs)
    assert batch.weights.shape == batch.actions.shape
    assert (batch.weights[batch.mask == 0] == 0).all(), "padding weighs nothing"

    out = tmp_path / "p.ckpt"
    tcfg = TrainConfig(epochs=1, batch_size=2, chunk=16, idm_weight=0.5, idm_min_confidence=0.2)
    said = []
    fit_policy([demos, idm_demos], encoder, out, tcfg, shape=TINY_POLICY, progress=False, logdir=tmp_path / "logs", say=said.append)
    hp, _ = read_checkpoint(out, "policy")
    assert hp["train"]["idm_weight"] == 0.5 and hp["train"]["idm_min_confidence"] == 0.2
    assert any("2 DAgger or video episodes train only" in m for m in said)
    assert hp["scoring"]["mean_length"] == pytest.approx(np.mean([len(e) for e in load_episodes(demos)])), \
        "scoring data comes from the expert's demos only"


def test_step_weights_follow_the_idm_options():
    from playtester.imitation.data import IdmUse, step_weights

    steps = [{"t": 0, "action": 0}, {"t": 1, "action": 1, "label_source": "idm", "confidence": 0.9},
             {"t": 2, "action": 1, "label_source": "idm", "confidence": 0.2, "low_confidence": True}]
    ep = Episode(path=None, meta={}, frames=np.zeros((3, 4, 4, 3), np.uint8), steps=steps)  # type: ignore[arg-type]
    assert step_weights(ep, IdmUse()).tolist() == [1, 1, 1]
    assert step_weights(ep, IdmUse(weight=0.5)).tolist() == [1, 0.5, 0.5]
    assert step_weights(ep, IdmUse(weight=0.5, min_confidence=0.5)).tolist() == [1, 0.5, 0]
    with pytest.raises(UserError, match="--idm-min-confidence 1.5"):
        IdmUse(min_confidence=1.5)


def test_weighted_cross_entropy_hand_worked():
    from playtester.imitation.training import weighted_cross_entropy

    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    actions = torch.tensor([0, 0, 1])
    each = torch.nn.functional.cross_entropy(logits, actions, reduction="none")
    assert weighted_cross_entropy(logits, actions, torch.ones(3)) == pytest.approx(float(each.mean()))
    assert weighted_cross_entropy(logits, actions, torch.tensor([1.0, 0.0, 1.0])) == pytest.approx(float((each[0] + each[2]) / 2))
    assert weighted_cross_entropy(logits, actions, torch.tensor([2.0, 1.0, 1.0])) == pytest.approx(float((2 * each[0] + each[1] + each[2]) / 4))
    assert float(weighted_cross_entropy(logits, actions, torch.zeros(3))) == 0.0


# -- bad footage: one line naming the file ----------------------------------------------------------


def _bad_videos(tmp_path, good_mp4) -> dict[str, tuple]:
    """name → (path, what the message must say)."""
    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 40)
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    no_frames = tmp_path / "no_frames.avi"
    subprocess.run([_ffmpeg(), "-y", "-loglevel", "error", "-f", "lavfi", "-i", "color=size=320x240:rate=10",
                    "-frames:v", "0", "-c:v", "mpeg4", str(no_frames)], check=True)
    codec = tmp_path / "codec.mp4"
    codec.write_bytes(good_mp4.read_bytes().replace(b"avc1", b"zzz9"))  # a codec tag no decoder knows
    small = tmp_path / "small.mp4"
    write_video(small, _bars(6, (48, 36)), fps=10)
    slow = tmp_path / "slow.mp4"
    write_video(slow, _bars(6), fps=4)
    return {
        "corrupt": (corrupt, "not a readable video"), "empty": (empty, "the file is empty"),
        "zero frames": (no_frames, "no video frames"), "unknown codec": (codec, "codec is not one this ffmpeg can decode"),
        "too small": (small, "smaller than the encoder's 64×64 input"), "too slow": (slow, "fewer than the control rate"),
    }


@pytest.mark.slow
def test_bad_footage_is_named_in_one_line(rendered, tiny_parts, tmp_path, capsys):
    _, encoder, _ = tiny_parts("path")
    for what, (path, says) in _bad_videos(tmp_path, rendered / "ep0000.mp4").items():
        out = tmp_path / f"out-{path.stem}"
        assert main(["demos", "--from-video", str(path), "--idm", str(encoder), "--out", str(out), "--behavior", "path"]) == 2, what
        err = capsys.readouterr().err
        assert str(path.name) in err and says in err and "Traceback" not in err, (what, err)
        assert not out.exists() or not any(out.iterdir()), f"{what}: nothing is written"
    # in a folder, each bad video is named and skipped (its name as it is, brackets too: not read
    # as markup), a video left unfinished by a crash is not read at all; the good ones are labelled
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "good.mp4").write_bytes((rendered / "ep0001.mp4").read_bytes())
    (folder / "bad [take 2].mp4").write_bytes(b"not a video")
    (folder / "cut.partial.mp4").write_bytes(b"half a video")
    assert main(["demos", "--from-video", str(folder), "--idm", str(encoder), "--out", str(tmp_path / "mixed"), "--behavior", "path"]) == 0
    said = capsys.readouterr()
    said = " ".join((said.out + said.err).split())  # as one line, whatever the terminal width
    assert "bad [take 2].mp4: not a readable video" in said and "cut.partial" not in said
    assert [e.name for e in load_episodes(tmp_path / "mixed")] == ["good-000"]
    assert main(["demos", "--idm", str(encoder), "--out", str(tmp_path / "x"), "--behavior", "path"]) == 2
    assert "pass --from-video" in capsys.readouterr().err


@pytest.mark.slow
def test_a_key_map_that_is_not_the_encoders_is_refused(rendered, tiny_parts, tmp_path, capsys):
    _, encoder, _ = tiny_parts("path")
    keymap = tmp_path / "km.yaml"
    keymap.write_text("name: two\nactions:\n  - {name: go, keys: [w]}\n  - {name: back, keys: [s]}\n")
    assert main(["demos", "--from-video", str(rendered / "ep0000.mp4"), "--idm", str(encoder), "--key-map", str(keymap),
                 "--out", str(tmp_path / "o"), "--behavior", "path"]) == 2
    err = capsys.readouterr().err
    assert "--key-map two" in err and "go, back" in err and "forward" in err
