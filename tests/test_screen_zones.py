"""RELINE's injected zones: the sprite found by colour, first hits rewarded once, bad zones refused;
Ms. Pac-Man through ale-py (`gym:ALE/...`), and the one line when ale-py is missing."""

from __future__ import annotations

import builtins

import gymnasium as gym
import numpy as np
import pytest

from playtester.capture.screen_zones import MS_PACMAN, MS_PACMAN_ZONES, ScreenZone, SpriteColour, ZoneHits, zones_entered
from playtester.errors import UserError

SPRITE = SpriteColour((210, 164, 74), rows=(0, 20))


class Dot(gym.Env):
    """A 40×30 screen with one sprite pixel that moves to the column each action names."""

    observation_space = gym.spaces.Box(0, 255, (30, 40, 3), np.uint8)
    action_space = gym.spaces.Discrete(40)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = 20
        return self.frame(), {}

    def step(self, action):
        self.x = int(action)
        return self.frame(), 1.0, False, False, {}

    def frame(self):
        f = np.zeros((30, 40, 3), np.uint8)
        f[10, self.x] = SPRITE.rgb
        f[25, 0] = SPRITE.rgb  # the same colour below the playfield: not the sprite
        return f


def test_sprite_by_exact_colour_inside_the_playfield():
    frame = Dot().reset()[0]
    mask = SPRITE.mask(frame)
    assert mask.sum() == 1 and mask[10, 20]
    frame[11, 21] = (210, 164, 75)  # one grey level off: another sprite
    assert SPRITE.mask(frame).sum() == 1
    zones = [ScreenZone("left", 0, 0, 5, 20), ScreenZone("mid", 18, 5, 22, 15)]
    assert zones_entered(mask, zones) == [False, True]


def test_first_hit_of_each_zone_is_rewarded_once_an_episode():
    zones = [ScreenZone("left", 0, 0, 4, 20), ScreenZone("right", 36, 0, 40, 20)]
    env = ZoneHits(Dot(), zones, SPRITE, bonus=50)
    _, info = env.reset(seed=0)
    assert info["zones_hit"] == []
    rewards, hits = [], []
    for x in (10, 2, 3, 20, 38, 1):  # left, left again, right, left again
        _, r, *_, info = env.step(x)
        rewards.append(r)
        hits.append(info["zones_new"])
    assert rewards == [1.0, 51.0, 1.0, 1.0, 51.0, 1.0]
    assert hits == [[], ["left"], [], [], ["right"], []]
    assert info["zones_hit"] == ["left", "right"]
    env.reset()
    assert env.step(2)[1] == 51.0  # a new episode: the zone reveals itself again
    plain = ZoneHits(Dot(), zones, SPRITE)  # the baselines: the same oracle, no bonus
    plain.reset()
    _, r, *_, info = plain.step(2)
    assert r == 1.0 and info["zones_new"] == ["left"]


@pytest.mark.parametrize("zone", [ScreenZone("off", 38, 0, 41, 10), ScreenZone("under", 0, 25, 4, 31),
                                  ScreenZone("empty", 5, 5, 5, 9), ScreenZone("negative", -1, 0, 3, 3)])
def test_a_zone_outside_the_screen_is_one_line(zone):
    with pytest.raises(UserError, match=rf"zone {zone.name} .* outside the 40×30 screen"):
        ZoneHits(Dot(), [zone], SPRITE)


def test_zone_text_is_parsed_or_refused():
    assert ScreenZone.parse("0,50,8,62", "a") == ScreenZone("a", 0, 50, 8, 62)
    with pytest.raises(UserError, match="zone a '0,50,8': give four whole numbers"):
        ScreenZone.parse("0,50,8", "a")


def test_the_tunnel_zones_fit_ms_pacmans_screen():
    for z in MS_PACMAN_ZONES:
        z.check(160, 210)
    assert {z.name for z in MS_PACMAN_ZONES} == {"upper-left", "upper-right", "lower-left", "lower-right"}


def test_a_missing_ale_py_names_the_extra(monkeypatch):
    from playtester.capture.games import make_game

    real_import = builtins.__import__

    def no_ale(name, *args, **kwargs):
        if name == "ale_py" or name.startswith("ale_py."):
            raise ImportError("No module named 'ale_py'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ale)
    monkeypatch.delitem(__import__("sys").modules, "ale_py", raising=False)
    with pytest.raises(UserError, match=r"gym:ALE/MsPacman-v5: needs ale-py, .* pip install 'playtester\[atari\]'"):
        make_game("gym:ALE/MsPacman-v5")


# A run found by random play with long moves (seed 1, no sticky actions): the lower-right tunnel at
# its 140th step. Each pair is (action, repeats); 1 up, 2 right, 3 left, 4 down.
TO_LOWER_RIGHT = [(3, 15), (2, 13), (1, 17), (3, 16), (2, 36), (4, 17), (1, 5), (2, 8), (1, 9), (2, 4)]


@pytest.mark.slow
def test_ms_pacman_plays_from_pixels_and_enters_the_lower_right_tunnel():
    pytest.importorskip("ale_py", reason="the atari extra (pip install 'playtester[atari]') is not installed")
    from playtester.capture.games import make_game

    env = ZoneHits(make_game("gym:ALE/MsPacman-v5", repeat_action_probability=0.0), bonus=50)
    frame, _ = env.reset(seed=1)
    assert frame.shape == (210, 160, 3) and env.action_space.n == 9
    ys, xs = np.nonzero(MS_PACMAN.mask(frame))
    assert 75 <= xs.min() and xs.max() <= 84 and 98 <= ys.min() and ys.max() <= 109  # she starts below the ghosts' box
    actions = [a for a, n in TO_LOWER_RIGHT for _ in range(n)]
    bonuses = []
    for a in actions:
        _, reward, terminated, _, info = env.step(a)
        assert not terminated
        bonuses.append(reward >= 50)
    assert info["zones_new"] == ["lower-right"] and info["zones_hit"] == ["lower-right"]
    assert bonuses.index(True) == len(actions) - 1 and sum(bonuses) == 1
    assert "frame_time_ms" in info and info["env_info"]["lives"] == 3
    env.close()
