"""The frame pipeline's one owner (`capture/frames.py`): the one resize and the frame spec."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from playtester.capture.frames import FrameSpec, resize


def picture(w: int, h: int) -> np.ndarray:
    """A deterministic RGB frame with gradients and sharp edges."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 7 + y * 3) % 256, (x * x // 5 + y) % 256, ((x ^ y) * 5) % 256], -1).astype(np.uint8)


@pytest.mark.parametrize("source, target", [((256, 256), (128, 128)), ((320, 240), (160, 120)), ((128, 128), (64, 64))])
def test_a_halving_gives_the_pixels_inter_area_gave(source, target):
    # What the encoder's and IDM's training pairs and RND's input were resized with before
    # (INTER_AREA); 128 → 64 is RND's input from the policy's frames.
    frame = picture(*source)
    before = cv2.resize(frame, target, interpolation=cv2.INTER_AREA)
    assert np.array_equal(resize(frame, target), before)
    assert np.array_equal(FrameSpec(*target).resize(frame), before)


def test_a_shrink_by_four_is_inter_area_within_one_grey_level_and_other_ratios_close():
    frame = picture(320, 240)
    four = resize(frame, (80, 60)).astype(int) - cv2.resize(frame, (80, 60), interpolation=cv2.INTER_AREA)
    assert np.abs(four).max() <= 1
    smooth = cv2.GaussianBlur(picture(640, 480), (0, 0), 3)
    other = resize(smooth, (128, 128)).astype(int) - cv2.resize(smooth, (128, 128), interpolation=cv2.INTER_AREA)
    assert np.abs(other).mean() < 3


@pytest.mark.parametrize("source, target", [((64, 64), (128, 128)), ((100, 80), (128, 128)), ((160, 120), (128, 128))])
def test_an_enlarge_or_a_mixed_change_gives_the_pixels_inter_area_gave(source, target):
    frame = picture(*source)
    assert np.array_equal(resize(frame, target), cv2.resize(frame, target, interpolation=cv2.INTER_AREA))


def test_sizes_are_width_height_and_arrays_height_width():
    spec = FrameSpec(96, 64)
    out = spec.resize(picture(320, 240))
    assert out.shape == spec.shape == (64, 96, 3) and spec.size == (96, 64)
    same = picture(96, 64)
    assert spec.resize(same) is same  # a frame of the right size is not copied
    with pytest.raises(ValueError, match="not square"):
        spec.side


def test_a_batch_keeps_a_channel_axis_of_one():
    grey = picture(128, 128)[..., :1][None].repeat(3, axis=0)
    out = FrameSpec.square(64).resize_batch(grey)
    assert out.shape == (3, 64, 64, 1)
    assert np.array_equal(out[0, ..., 0], resize(grey[0, ..., 0], (64, 64)))


def test_a_saved_spec_round_trips_and_an_old_config_builds_one_from_its_size():
    spec = FrameSpec(96, 64)
    assert FrameSpec.from_dict(spec.to_dict()) == spec
    assert FrameSpec.from_config({"frames": spec.to_dict(), "image_size": 128}, "image_size", 64) == spec
    assert FrameSpec.from_config({"image_size": 128}, "image_size", 64) == FrameSpec.square(128)
    assert FrameSpec.from_config({}, "image_size", 64) == FrameSpec.square(64)


def test_the_encoder_checkpoint_carries_the_spec_and_a_policy_on_it_inherits_it(tmp_path):
    from dataclasses import asdict

    import torch

    from playtester.imitation.policy import ImitationPolicy, PolicyConfig, build_encoder
    from playtester.perception.encoder import EncoderConfig, InverseDynamicsModule, load_encoder
    from playtester.perception.training import CHECKPOINT_VERSION

    module = InverseDynamicsModule(**asdict(EncoderConfig(action_names=["a", "b"], image_size=72, feature_dim=8, hidden=8,
                                                          pretrained="none")))

    def save(hparams: dict, path):  # what Lightning's save_checkpoint writes, tagged as `on_save_checkpoint` does
        state = {f"model.{k}": v for k, v in module.model.state_dict().items()}
        torch.save({"hyper_parameters": hparams, "state_dict": state,
                    "playtester": {"model": "encoder", "version": CHECKPOINT_VERSION}}, path)
        return path

    saved = dict(module.hparams)
    assert saved["frames"] == {"width": 72, "height": 72}
    enc = load_encoder(save(saved, tmp_path / "enc.ckpt"))
    assert enc.config.frames == FrameSpec.square(72)

    # The policy has no size of its own: it reads its encoder's spec, and resizes game frames to it.
    policy_cfg = PolicyConfig(n_actions=2, feature_dim=8, k=2, local_hidden=4, global_hidden=4, mlp=(8,), encoder=asdict(enc.config))
    assert policy_cfg.frames == FrameSpec.square(72) and "frames" in policy_cfg.to_dict()["encoder"]
    policy = ImitationPolicy(policy_cfg, build_encoder(policy_cfg.encoder))
    game_frames = torch.from_numpy(np.stack([picture(320, 240)] * 2))
    assert policy.encode(game_frames).shape == (2, 8)

    # Checkpoints from before the spec: the encoder's from its image_size, an old policy's from its own.
    assert "image_size" not in saved  # today's keeps its spec alone
    old = {k: v for k, v in saved.items() if k != "frames"} | {"image_size": 72}
    assert load_encoder(save(old, tmp_path / "old.ckpt")).config.frames == FrameSpec.square(72)
    assert PolicyConfig(image_size=96, encoder={}).frames == FrameSpec.square(96)


SIZE_NAMES = ("frame_size", "image_size")
NOT_THE_FRAME_PIPELINE = {
    ("perception/detector.py", "DetectorConfig"): "the detector's input scale (torchvision's min and max size), applied to "
                                                  "frames at the game's own size: not a network's frames",
    ("perception/recipes.py", "DetectorRecipe"): "the same, as `train detector` is given it",
}
"""Size numbers that are not the frames a network of the frame pipeline takes, with why."""


def size_number_fields() -> list[tuple[str, str, str]]:
    """`(file, class, field)` of each dataclass field named like a frame size that holds a number.
    An `InitVar` is not one: the constructor reads it (a checkpoint's side from before the spec)
    into the class's `frames` and keeps nothing of it."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = []
    for area in ("playtester", "capture", "datasets", "perception", "imitation", "exploration"):
        for path in sorted((root / area).rglob("*.py")):
            if path.is_relative_to(root / "playtester") and path.relative_to(root / "playtester").parts[0] in (
                    "capture", "datasets", "perception", "imitation", "exploration"):
                continue  # the areas' links in playtester/: read once, at their own folder
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                                and item.target.id in SIZE_NAMES and "int" in ast.unparse(item.annotation)
                                and not ast.unparse(item.annotation).startswith(("tuple", "InitVar"))):
                            found.append((str(path.relative_to(root)), node.name, item.target.id))
    return found


def test_no_config_keeps_a_frame_size_as_a_number_beside_the_frame_spec():
    """The frames a network takes are one `FrameSpec`, passed down as an object: no config of the
    package keeps a `frame_size` or `image_size` number (checkpoints from before the spec are read
    back by `saved_frames`, `FrameSpec.from_config` or an `InitVar`), except sizes that are not
    network frames."""
    found = size_number_fields()
    kept = [f for f in found if f[:2] not in NOT_THE_FRAME_PIPELINE]
    assert not kept, f"a frame size kept as a number (give the class a `frames: FrameSpec`): {kept}"
    assert {f[:2] for f in found} >= set(NOT_THE_FRAME_PIPELINE), "an allowed size is gone: drop it from the list"


def test_configs_saved_before_the_frame_spec_read_their_side_back_as_a_spec():
    """A checkpoint from before the spec kept `frame_size: 48`: PPO's, RND's (inside the exploration
    reward's) and the population's configs read it back as a 48×48 spec; today's save as `{width, height}`."""
    from dataclasses import asdict

    from playtester.capture.frames import saved_frames
    from playtester.evolution.population import EvolutionConfig
    from playtester.exploration.ppo_config import PPOConfig, saved_ppo_config
    from playtester.exploration.reward import ExplorationRewardConfig

    old = {k: v for k, v in asdict(PPOConfig()).items() if k != "frames"} | {"frame_size": 48}
    assert saved_ppo_config(old).frames == FrameSpec.square(48)
    assert asdict(PPOConfig(frames=FrameSpec(48, 40)))["frames"] == {"width": 48, "height": 40}
    assert PPOConfig(**asdict(PPOConfig(frames=FrameSpec(48, 40)))).frames == FrameSpec(48, 40)
    assert ExplorationRewardConfig(rnd={"frame_size": 48}).rnd.frames == FrameSpec.square(48)
    evolution = {k: v for k, v in asdict(EvolutionConfig(game="doom:park")).items() if k != "frames"} | {"frame_size": 40}
    evolution["ppo"] = old
    saved = EvolutionConfig(**saved_frames(evolution, "frame_size"))
    assert saved.frames == FrameSpec.square(40) and saved.ppo.frames == FrameSpec.square(48)
    with pytest.raises(ValueError, match="36 pixels"):
        PPOConfig(frames=FrameSpec(64, 30))


def test_an_encoder_or_policy_checkpoint_from_before_the_spec_keeps_its_side():
    """An encoder config saved with `image_size: 96` and no `frames` (`EncoderConfig.from_dict`, as
    a policy's `encoder` entry is read) and a policy config with only its own `image_size` both
    come back with 96×96 frames; today's configs save `frames` and no side."""
    from dataclasses import asdict

    from playtester.imitation.policy import PolicyConfig
    from playtester.perception.encoder import EncoderConfig

    old = {"action_names": ["a", "b"], "image_size": 96, "feature_dim": 8, "pretrained": "none"}
    assert EncoderConfig.from_dict(old).frames == FrameSpec.square(96)
    saved = asdict(EncoderConfig(action_names=["a", "b"], frames=FrameSpec(96, 80), pretrained="none"))
    assert "image_size" not in saved and EncoderConfig.from_dict(saved).frames == FrameSpec(96, 80)
    assert PolicyConfig(image_size=96, encoder={"feature_dim": 8}).frames == FrameSpec.square(96)
    assert PolicyConfig(image_size=96, encoder={"image_size": 64}).frames == FrameSpec.square(64)  # the encoder's wins
    assert "image_size" not in asdict(PolicyConfig(encoder=saved))
