"""Block Maze: Wuji's small benchmark game, with injected bugs, as a Gymnasium env drawn in pixels.

A robot walks a seeded grid maze (four moves; a move into a block does nothing) to a coin. The
reward is the game's own: +0.1 for each step of maze distance gained towards the coin (−0.1
for each lost) and +1 for the coin, which ends the episode. The frame shows the whole maze from
above and, along the bottom, a clock that ticks every step (a live game's animation: only a
frozen game shows the same picture twice in a row).

Bugs are injected at places chosen from the seed, known to the game and the benchmark only,
never shown to the tester (`BlockMaze.bugs`): some near the start, some far along the way to the
coin, some off the route in dead ends. Each kind fires when the robot steps on its cell, and
the tester has to notice it the way it notices any bug:

- `crash`: the game dies (`info["crashed"]`, the episode ends) → the crash oracle;
- `stuck`: the game freezes (the picture stops changing, moves do nothing) → the stuck oracle;
- `logic`: the telemetry breaks an invariant (health drops below zero for that step) → the
  user assertion `health_in_range` (`--assert playtester.capture.block_maze:health_in_range`).

Registered as `playtester/BlockMaze-v0` (`--game gym:playtester/BlockMaze-v0`); options such
as `maze_seed` and `size` go through `make_game(…, maze_seed=3)`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

ENV_ID = "playtester/BlockMaze-v0"
MOVES = ((0, -1), (0, 1), (1, 0), (-1, 0))
"""North, south, east, west as (dx, dy); y grows downwards on screen."""
COLOURS = {"block": (20, 90, 40), "floor": (205, 205, 190), "robot": (40, 70, 220), "coin": (235, 190, 20),
           "clock": (250, 250, 250), "hud": (30, 30, 30)}
BUG_KINDS = ("crash", "stuck", "logic")
REGIONS = ("near", "far", "off_route")


@dataclass(frozen=True)
class MazeBug:
    """One injected bug: where it fires and what it does."""

    id: int
    kind: str
    """crash, stuck or logic."""
    cell: tuple[int, int]
    """(x, y) of the cell that triggers it."""
    region: str
    """near (the start), far (along the way to the coin), off_route (a dead end)."""


def carve_maze(size: int, rng: np.random.Generator, loops: int) -> np.ndarray:
    """`size×size` bools, True = block: a depth-first maze on the odd cells, then `loops` extra
    openings so that more than one way leads somewhere."""
    blocks = np.ones((size, size), dtype=bool)
    blocks[1, 1] = False
    stack = [(1, 1)]
    while stack:
        x, y = stack[-1]
        options = [(x + 2 * dx, y + 2 * dy, dx, dy) for dx, dy in MOVES
                   if 0 < x + 2 * dx < size - 1 and 0 < y + 2 * dy < size - 1 and blocks[y + 2 * dy, x + 2 * dx]]
        if not options:
            stack.pop()
            continue
        nx, ny, dx, dy = options[int(rng.integers(len(options)))]
        blocks[y + dy, x + dx] = blocks[ny, nx] = False
        stack.append((nx, ny))
    inner = [(x, y) for y in range(1, size - 1) for x in range(1, size - 1)
             if blocks[y, x] and ((x % 2 == 1) != (y % 2 == 1))]
    for i in rng.permutation(len(inner))[:loops]:
        x, y = inner[int(i)]
        blocks[y, x] = False
    return blocks


def distances(blocks: np.ndarray, source: tuple[int, int]) -> np.ndarray:
    """Maze distance (steps) from `source` to every open cell; −1 where unreachable."""
    dist = np.full(blocks.shape, -1, dtype=np.int64)
    dist[source[1], source[0]] = 0
    queue = deque([source])
    while queue:
        x, y = queue.popleft()
        for dx, dy in MOVES:
            nx, ny = x + dx, y + dy
            if not blocks[ny, nx] and dist[ny, nx] < 0:
                dist[ny, nx] = dist[y, x] + 1
                queue.append((nx, ny))
    return dist


def place_bugs(blocks: np.ndarray, start: tuple[int, int], coin: tuple[int, int], per_region: int,
               rng: np.random.Generator) -> list[MazeBug]:
    """`per_region` bugs near the start, far along the way and off the route, kinds in turn.

    A crash or a freeze ends what an episode can reach past it: on the only way to the coin it
    would make the game unwinnable, so those two kinds are never put on a shortest route (logical
    bugs may be); and none is put where it would cut another bug, or the coin, off from the start
    (before 2026-11-29 one could: a freeze three steps down a dead end hid the crash and the
    logical bug behind it from every strategy; four of the first five mazes had a bug cut off,
    maze 3 six of its nine). Every bug can be reached with the others all in place.
    """
    from_start, to_coin = distances(blocks, start), distances(blocks, coin)
    total = from_start[coin[1], coin[0]]
    open_cells = [(x, y) for y, x in zip(*np.nonzero(~blocks)) if (x, y) not in (start, coin)]
    on_route = {c for c in open_cells if from_start[c[1], c[0]] + to_coin[c[1], c[0]] == total}
    pools = {
        "near": [c for c in open_cells if 2 <= from_start[c[1], c[0]] <= max(4, total // 4)],
        "far": [c for c in open_cells if from_start[c[1], c[0]] >= 0.6 * total],
        # a dead-end cell at least three steps off the route
        "off_route": [c for c in open_cells if c not in on_route
                      and from_start[c[1], c[0]] + to_coin[c[1], c[0]] >= total + 6],
    }
    bugs: list[MazeBug] = []
    taken: set[tuple[int, int]] = set()
    ending: set[tuple[int, int]] = set()  # the crash and freeze cells so far

    def reachable(cell: tuple[int, int], enders: set[tuple[int, int]]) -> bool:
        """Whether `cell` can be walked to from the start without passing an episode-ending cell."""
        walls = blocks.copy()
        for x, y in enders - {cell}:
            walls[y, x] = True
        return bool(distances(walls, start)[cell[1], cell[0]] >= 0)

    def fits(c: tuple[int, int], kind: str) -> bool:
        if c in taken or not reachable(c, ending):
            return False
        if kind == "logic":
            return True
        enders = ending | {c}
        return c not in on_route and all(reachable(other, enders) for other in (*taken, coin))

    for region in REGIONS:
        for _ in range(per_region):
            for turn in range(len(BUG_KINDS)):  # the next kind in turn that has a cell left here
                kind = BUG_KINDS[(len(bugs) + turn) % len(BUG_KINDS)]
                pool = [c for c in pools[region] if fits((int(c[0]), int(c[1])), kind)]
                if pool:
                    break
            if not pool:
                continue
            cell = pool[int(rng.integers(len(pool)))]
            cell = (int(cell[0]), int(cell[1]))
            taken.add(cell)
            if kind != "logic":
                ending.add(cell)
            bugs.append(MazeBug(len(bugs), kind, cell, region))
    return bugs


class BlockMaze(gym.Env):
    """The maze game; its own observation is the robot's cell, the tester sees `render()`."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, *, size: int = 15, maze_seed: int = 0, bugs_per_region: int = 3, loops: int = 6,
                 cell_px: int = 5, render_mode: str | None = "rgb_array"):
        if size < 7 or size % 2 == 0:
            raise ValueError(f"size={size}: use an odd number of cells, at least 7")
        if cell_px < 1 or bugs_per_region < 0:
            raise ValueError(f"cell_px={cell_px} must be ≥ 1 and bugs_per_region={bugs_per_region} ≥ 0")
        rng = np.random.default_rng(maze_seed)
        self.size, self.cell_px, self.render_mode = size, cell_px, render_mode
        self.blocks = carve_maze(size, rng, loops)
        self.start = (1, 1)
        from_start = distances(self.blocks, self.start)
        far = np.argwhere(from_start >= 0.8 * from_start.max())  # the coin goes somewhere far
        y, x = far[int(rng.integers(len(far)))]
        self.coin = (int(x), int(y))
        self.to_coin = distances(self.blocks, self.coin)
        self.bugs = place_bugs(self.blocks, self.start, self.coin, bugs_per_region, rng)
        self._bug_at = {b.cell: b for b in self.bugs}
        self.observation_space = gym.spaces.Box(0, size - 1, shape=(2,), dtype=np.int64)
        self.action_space = gym.spaces.Discrete(len(MOVES))
        self._background = self._draw_background()
        self.pos = self.start
        self.frozen = False
        self.steps = 0

    def _draw_background(self) -> np.ndarray:
        p = self.cell_px
        image = np.empty(((self.size + 1) * p, self.size * p, 3), dtype=np.uint8)
        image[:] = COLOURS["hud"]
        grid = np.where(self.blocks[..., None], np.array(COLOURS["block"], np.uint8), np.array(COLOURS["floor"], np.uint8))
        image[: self.size * p] = np.repeat(np.repeat(grid, p, axis=0), p, axis=1)
        return image

    def _fill(self, image: np.ndarray, cell: tuple[int, int], colour: str) -> None:
        p = self.cell_px
        x, y = cell
        image[y * p : (y + 1) * p, x * p : (x + 1) * p] = COLOURS[colour]

    def render(self) -> np.ndarray:
        image = self._background.copy()
        self._fill(image, self.coin, "coin")
        self._fill(image, self.pos, "robot")
        self._fill(image, (self.steps % self.size, self.size), "clock")
        return image

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.pos, self.frozen, self.steps = self.start, False, 0
        return np.array(self.pos), self._info(100)

    def step(self, action):
        if self.frozen:  # the game hangs: nothing moves, nothing is drawn again
            return np.array(self.pos), 0.0, False, False, self._info(100)
        dx, dy = MOVES[int(action)]
        before = self.pos
        x, y = before[0] + dx, before[1] + dy
        if not self.blocks[y, x]:
            self.pos = (x, y)
        self.steps += 1
        reward = 0.1 * float(self.to_coin[before[1], before[0]] - self.to_coin[self.pos[1], self.pos[0]])
        terminated = self.pos == self.coin
        reward += 1.0 if terminated else 0.0
        health, info_extra = 100, {}
        bug = self._bug_at.get(self.pos) if self.pos != before else None
        if bug is not None and bug.kind == "crash":
            terminated = True
            info_extra = {"crashed": True, "crash_reason": "the game process exited (segmentation fault)"}
        elif bug is not None and bug.kind == "stuck":
            self.frozen = True
        elif bug is not None and bug.kind == "logic":
            health = -25
        return np.array(self.pos), reward, terminated, False, self._info(health) | info_extra

    def _info(self, health: int) -> dict[str, Any]:
        return {"position": self.pos, "health": health, "steps": self.steps}


def health_in_range(frame: np.ndarray, info: dict[str, Any]) -> bool | str:
    """The Block Maze's logical invariant, as a developer would write it: health in [0, 100]."""
    health = (info.get("env_info") or info).get("health")
    if health is None or 0 <= health <= 100:
        return True
    return f"health is {health}, outside [0, 100]"


def register() -> None:
    """Register `playtester/BlockMaze-v0` with Gymnasium (once)."""
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point="playtester.capture.block_maze:BlockMaze", max_episode_steps=1000)


register()
