import numpy as np
import pytest

from playtester.perception.places import frame_cell
from playtester.report.coverage import OccupancyGrid


def test_occupancy_grid_hand_worked():
    g = OccupancyGrid((0.0, 0.0, 400.0, 200.0), cell=100.0)
    assert (g.rows, g.cols) == (2, 4)
    for x, y in [(10, 10), (50, 20), (150, 10), (390, 199), (-5, 10), (400, 0)]:
        g.visit(x, y)
    assert g.counts.tolist() == [[2, 1, 0, 0], [0, 0, 0, 1]]
    assert g.share() == pytest.approx(3 / 8)
    mask = np.array([[True, False, True, False], [False, False, True, True]])
    # preferred cells: (0,0) visited, (0,2) not, (1,2) not, (1,3) visited
    assert g.share(mask) == pytest.approx(2 / 4)
    assert g.share(np.zeros((2, 4), bool)) == 0.0
    with pytest.raises(ValueError):
        g.share(np.ones((3, 3), bool))


def test_frame_cells_group_similar_frames():
    rng = np.random.default_rng(0)
    base = np.zeros((120, 160, 3), np.uint8)
    base[:, 80:] = 200
    noisy = np.clip(base.astype(int) + rng.integers(-3, 4, base.shape), 0, 255).astype(np.uint8)
    other = base[:, ::-1].copy()
    assert frame_cell(noisy) == frame_cell(base)
    assert frame_cell(other) != frame_cell(base)
    assert len(frame_cell(base)) == 11 * 8
