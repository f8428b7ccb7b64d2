"""The scripted experts that stand in for human testers, judged by telemetry on the real engine."""

import numpy as np
import pytest

from playtester.capture.experts import Inspector, PathFollower, inspect_start


def test_inspector_circles_its_ooi_keeping_it_on_screen(park_env):
    layout = park_env.scenario.layout
    reachable = [o for o in layout.oois if o.reachable]
    assert len(reachable) >= 4
    for k, ooi in enumerate(reachable[:4]):
        rng = np.random.default_rng(k)
        frame, info = park_env.reset(seed=k, options={"start": inspect_start(layout, ooi, rng)})
        expert = Inspector(layout, park_env.keymap, rng, ooi)
        expert.reset(info)
        for _ in range(400):
            frame, _, terminated, truncated, info = park_env.step(expert.act(info))
            if expert.done or terminated or truncated:
                break
        p = expert.progress
        assert expert.done, f"OOI {ooi.id}: the circle was not finished in 400 steps ({p.degrees:.0f}°)"
        assert p.degrees >= 330
        assert p.steps_on_screen / p.steps >= 0.8, f"OOI {ooi.id} on screen in {p.steps_on_screen}/{p.steps} steps"


def test_path_follower_stays_on_pathways(park_env):
    layout = park_env.scenario.layout
    starts = [i for i, s in enumerate(layout.starts) if s.on_path]
    on_path = total = 0
    visited = set()
    for k in range(3):
        rng = np.random.default_rng(k)
        frame, info = park_env.reset(seed=k, options={"start": starts[k % len(starts)]})
        expert = PathFollower(layout, park_env.keymap, rng)
        expert.reset(info)
        for _ in range(250):
            frame, _, _, _, info = park_env.step(expert.act(info))
            x, y, _ = info["position"]
            on_path += layout.on_pathway(x, y)
            total += 1
            visited.add(layout.cell_of(x, y))
    assert on_path / total >= 0.9
    assert len(visited) >= 30, "it should walk the network, not stand still"


def test_experts_need_the_default_action_names(park_env):
    from playtester.capture.errors import UserError
    from playtester.capture.keymap import KeyMap

    km = KeyMap.from_dict({"name": "tiny", "actions": [{"name": "go", "keys": ["w"]}]})
    with pytest.raises(UserError, match="turn_left"):
        PathFollower(park_env.scenario.layout, km, np.random.default_rng(0))
