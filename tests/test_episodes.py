"""The demo episode store: round trip, atomic publication, broken episodes named and skipped."""

import json

import numpy as np
import pytest

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.datasets.episodes import Episode, EpisodeWriter, load_episodes, next_episode_name


def write(root, name, n=6, shape=(12, 16, 3), behavior="path", seed=0):
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)
    with EpisodeWriter(root, name, game="doom:park", behavior=behavior, keymap=KeyMap.default(), fps=8.75) as w:
        for t in range(n):
            w.add(frames[t], t % 9, ["w"], position=(float(t), 2.0, 0.0), angle=np.float32(45.0))
    return frames


def test_round_trip_is_exact_and_memory_mapped(tmp_path):
    frames = write(tmp_path, "ep0000", n=7)
    ep = Episode.open(tmp_path / "ep0000")
    assert isinstance(ep.frames, np.memmap)
    assert np.array_equal(ep.frames, frames)
    assert list(ep.actions) == [t % 9 for t in range(7)]
    assert ep.steps[3] == {"t": 3, "action": 3, "keys": ["w"], "position": [3.0, 2.0, 0.0], "angle": 45.0}
    assert ep.meta["size"] == [12, 16] and ep.meta["steps"] == 7 and ep.meta["behavior"] == "path"
    assert ep.keymap == KeyMap.default()
    assert not (tmp_path / "ep0000.partial").exists()


def test_partial_left_by_a_crash_is_ignored(tmp_path):
    write(tmp_path, "ep0000")
    w = EpisodeWriter(tmp_path, "ep0001", game="g", behavior="path", keymap=KeyMap.default(), fps=1)
    w.add(np.zeros((12, 16, 3), np.uint8), 0)
    # the process dies here: no close()
    assert (tmp_path / "ep0001.partial").is_dir()
    eps = load_episodes(tmp_path)
    assert [e.name for e in eps] == ["ep0000"]
    assert next_episode_name(tmp_path) == "ep0002"


def test_demos_gathered_by_symlinks_are_found_once_and_links_back_up_do_not_loop(tmp_path):
    for park in ("park1", "park3"):
        (tmp_path / park).mkdir()
        write(tmp_path / park, "ep0000")
    gathered = tmp_path / "all"
    gathered.mkdir()
    for park in ("park1", "park3"):
        (gathered / park).symlink_to(tmp_path / park, target_is_directory=True)
    (gathered / "park1-again").symlink_to(tmp_path / "park1", target_is_directory=True)
    (tmp_path / "park3" / "up").symlink_to(gathered, target_is_directory=True)  # a cycle
    eps = load_episodes(gathered)
    assert sorted(e.path.resolve() for e in eps) == [tmp_path / "park1" / "ep0000", tmp_path / "park3" / "ep0000"]


def test_exception_while_recording_discards_the_episode(tmp_path):
    with pytest.raises(RuntimeError):
        with EpisodeWriter(tmp_path, "ep0000", game="g", behavior="path", keymap=KeyMap.default(), fps=1) as w:
            w.add(np.zeros((4, 4, 3), np.uint8), 0)
            raise RuntimeError("game crashed")
    assert list(tmp_path.iterdir()) == []


def test_truncated_frames_names_the_episode_and_loaders_skip_it(tmp_path):
    write(tmp_path, "ep0000")
    write(tmp_path, "ep0001")
    frames = tmp_path / "ep0001" / "frames.npy"
    frames.write_bytes(frames.read_bytes()[:-100])
    with pytest.raises(UserError) as e:
        Episode.open(tmp_path / "ep0001")
    assert "ep0001" in str(e.value) and "frames.npy" in str(e.value)
    assert [ep.name for ep in load_episodes(tmp_path)] == ["ep0000"]
    with pytest.raises(UserError, match="ep0001"):
        load_episodes(tmp_path, strict=True)


def test_step_count_mismatch_and_bad_action_are_errors(tmp_path):
    write(tmp_path, "ep0000")
    steps = tmp_path / "ep0000" / "steps.jsonl"
    lines = steps.read_text().splitlines()
    steps.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(UserError, match="6 frames but 5 steps"):
        Episode.open(tmp_path / "ep0000")
    lines[2] = json.dumps({**json.loads(lines[2]), "action": 42})
    steps.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match="step 2 has an action outside"):
        Episode.open(tmp_path / "ep0000")


def test_labels_are_the_experts_where_given_and_the_action_elsewhere(tmp_path):
    frames = np.zeros((4, 12, 16, 3), np.uint8)
    with EpisodeWriter(tmp_path, "ep0000", game="g", behavior="path", keymap=KeyMap.default(), fps=1,
                       extra={"dagger": {"policy": "p.ckpt", "beta": 0.0}}) as w:
        w.add(frames[0], 4, label=0)
        w.add(frames[1], 4)
        w.add(frames[2], 5, label=5)
        w.add(frames[3], 0, label=7)
    ep = Episode.open(tmp_path / "ep0000")
    assert list(ep.actions) == [4, 4, 5, 0]  # what was executed: the episode replays
    assert list(ep.labels) == [0, 4, 5, 7]
    assert not ep.expert_driven
    write(tmp_path, "ep0001")
    assert Episode.open(tmp_path / "ep0001").expert_driven
    steps = tmp_path / "ep0000" / "steps.jsonl"
    lines = steps.read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "label": 9})
    steps.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match="step 1 has a label outside"):
        Episode.open(tmp_path / "ep0000")


def test_empty_or_missing_folders_are_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_episodes(tmp_path / "nowhere")
    with pytest.raises(UserError, match="no complete episodes"):
        load_episodes(tmp_path)
    write(tmp_path, "ep0000", behavior="inspect")
    with pytest.raises(UserError, match="behaviour 'path'"):
        load_episodes(tmp_path, behavior="path")


def test_writer_refuses_missing_parent_and_mixed_shapes(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        EpisodeWriter(tmp_path / "a" / "b", "ep", game="g", behavior="b", keymap=KeyMap.default(), fps=1)
    w = EpisodeWriter(tmp_path, "ep", game="g", behavior="b", keymap=KeyMap.default(), fps=1)
    w.add(np.zeros((4, 4, 3), np.uint8), 0)
    with pytest.raises(ValueError, match="shape"):
        w.add(np.zeros((5, 4, 3), np.uint8), 0)
    w.discard()
    with pytest.raises(UserError, match="already exists"):
        write(tmp_path, "x")
        write(tmp_path, "x")


def test_long_episode_streams_with_a_fixed_header(tmp_path):
    frames = write(tmp_path, "long", n=300, shape=(30, 40, 3))
    ep = Episode.open(tmp_path / "long")
    assert ep.frames.shape == (300, 30, 40, 3)
    assert np.array_equal(ep.frames[-1], frames[-1])
