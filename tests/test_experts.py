"""The scripted experts that stand in for human testers, judged by telemetry on the real engine."""

import numpy as np
import pytest

from playtester.capture.experts import Inspector, PathFollower, cells_apart, inspect_start, ooi_on_screen


def test_inspector_circles_its_ooi_keeping_it_on_screen(park_env):
    """On screen while circling, and on the way there too: a policy cloned from the demos sees
    only the frames, so an approach that turns the object away would teach it to lose it."""
    layout = park_env.scenario.layout
    reachable = [o for o in layout.oois if o.reachable]
    assert len(reachable) >= 4
    approach = approach_on_screen = 0
    for k, ooi in enumerate(reachable[:4]):
        rng = np.random.default_rng(k)
        frame, info = park_env.reset(seed=k, options={"start": inspect_start(layout, ooi, rng)})
        expert = Inspector(layout, park_env.keymap, rng, ooi)
        expert.reset(info)
        for _ in range(400):
            if not expert.circling:
                approach += 1
                approach_on_screen += ooi_on_screen(info, ooi.id) is not None
            frame, _, terminated, truncated, info = park_env.step(expert.act(info))
            if expert.done or terminated or truncated:
                break
        p = expert.progress
        assert expert.done, f"OOI {ooi.id}: the circle was not finished in 400 steps ({p.degrees:.0f}°)"
        assert p.degrees >= 330
        assert p.steps_on_screen / p.steps >= 0.8, f"OOI {ooi.id} on screen in {p.steps_on_screen}/{p.steps} steps"
    assert approach_on_screen / approach >= 0.9, f"on screen in {approach_on_screen} of {approach} steps walking up to the OOIs"


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


def test_a_path_follower_sent_to_a_goal_walks_there_first_each_episode(park_env):
    """With goals it heads for the given pathway cell before any junction of its own choosing,
    and again after a reset; a goal off the network is refused in one line."""
    from playtester.errors import UserError

    layout = park_env.scenario.layout
    mask = layout.pathway_mask
    start = next(i for i, s in enumerate(layout.starts) if s.on_path)
    s0 = layout.starts[start]
    here = layout.cell_of(s0.x, s0.y)
    reach = layout.reachable_from(here)
    cells = [(int(c), int(r)) for r, c in np.argwhere(mask & reach)]
    goal = max(cells, key=lambda cell: len(layout.route(here, cell, only=mask) or []))  # the farthest by the paths
    assert len(layout.route(here, goal, only=mask)) >= 8
    expert = PathFollower(layout, park_env.keymap, np.random.default_rng(0), jitter=0.0, goals=[goal])
    for episode in range(2):
        frame, info = park_env.reset(seed=episode, options={"start": start})
        expert.reset(info)
        expert.act(info)
        assert expert.route[-1] == goal, "the first route ends at the goal"
        for t in range(400):
            x, y, _ = info["position"]
            if layout.cell_of(x, y) == goal:
                break
            frame, _, _, _, info = park_env.step(expert.act(info))
        else:
            raise AssertionError(f"episode {episode}: not at {goal} after 400 steps")
    grass = next((int(c), int(r)) for r, c in np.argwhere(~mask))
    with pytest.raises(UserError, match="not a pathway cell"):
        PathFollower(layout, park_env.keymap, np.random.default_rng(0), goals=[grass])


def test_jitter_is_taken_but_the_action_meant_is_the_label(park_env):
    """A glance, jump or side-step of jitter is executed (the encoder sees every action); the
    step's label is what the expert meant, so a policy learns the look back, not the glance."""
    layout = park_env.scenario.layout
    start = next(i for i, s in enumerate(layout.starts) if s.on_path)
    jitter = {park_env.keymap.index(n) for n in ("look_up", "look_down", "jump", "strafe_left", "strafe_right")}
    walking = {park_env.keymap.index(n) for n in ("forward", "turn_left", "turn_right")}
    for rate in (0.0, 0.5):
        frame, info = park_env.reset(seed=0, options={"start": start})
        expert = PathFollower(layout, park_env.keymap, np.random.default_rng(1), jitter=rate)
        expert.reset(info)
        differ = 0
        for _ in range(80):
            taken = expert.act(info)
            if taken != expert.intended:
                differ += 1
                assert taken in jitter and expert.intended in walking
            frame, _, _, _, info = park_env.step(taken)
        assert (differ == 0) if rate == 0.0 else (differ >= 20)


def test_path_follower_labels_the_way_back_after_a_push(park_env):
    """DAgger asks the expert about states it never drove to: pushed off its route onto the grass,
    it walks the shortest way back onto the network and goes on to the same goal."""
    layout = park_env.scenario.layout
    mask = layout.pathway_mask
    start = next(s for s in layout.starts if s.on_path)
    expert = PathFollower(layout, park_env.keymap, np.random.default_rng(0), jitter=0.0)
    info = {"position": (start.x, start.y, 0.0), "angle": 0.0, "pitch": 0.0}
    expert.reset(info)
    expert.act(info)
    goal = expert.route[-1]
    here = layout.cell_of(start.x, start.y)
    reach = layout.reachable_from(here)
    grass = [(c, r) for r, c in np.argwhere(reach & ~mask) if cells_apart((c, r), expert.route[0]) >= 3]
    pushed = max(grass, key=lambda cell: len(layout.route_to_nearest(cell, mask)))  # the farthest from the network
    x, y = layout.centre(*pushed)
    expert.act({"position": (x, y, 0.0), "angle": 0.0, "pitch": 0.0})
    route = expert.route
    assert route[-1] == goal, "the goal stays the same"
    assert cells_apart(pushed, route[0]) <= 1, "the next waypoint is beside the player"
    on = [bool(mask[r, c]) for c, r in route]
    back = on.index(True)
    assert not any(on[:back]) and all(on[back:]), "back onto the network once, then along it"
    # by the shortest way (the player stands on the first cell of it, which the expert has left behind)
    assert back + 1 == len(layout.route_to_nearest(pushed, mask)) - 1


def test_experts_need_the_default_action_names(park_env):
    from playtester.errors import UserError
    from playtester.capture.keymap import KeyMap

    km = KeyMap.from_dict({"name": "tiny", "actions": [{"name": "go", "keys": ["w"]}]})
    with pytest.raises(UserError, match="turn_left"):
        PathFollower(park_env.scenario.layout, km, np.random.default_rng(0))
