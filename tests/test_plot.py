"""meta_agent.plot: progress.png drawn with matplotlib (Agg). The PNG is read back and checked at
the pixels where the figure's own transform puts each candidate."""

from pathlib import Path

import pytest

from metaopt.meta_agent import plot

POINTS = [
    {"iteration": 0, "status": "baseline", "score": 0.40},
    {"iteration": 1, "status": "rejected", "score": 0.30},
    {"iteration": 2, "status": "accepted", "score": 0.60},
    {"iteration": 3, "status": "invalid", "score": None},
    {"iteration": 4, "status": "inconclusive", "score": 0.62},
    {"iteration": 5, "status": "rejected", "score": None},
    {"iteration": 6, "status": "accepted", "score": 0.80},
    {"iteration": 7, "status": "pending", "score": None},
]


def rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))


@pytest.fixture(scope="module")
def chart(tmp_path_factory):
    from matplotlib.image import imread

    path = tmp_path_factory.mktemp("plot") / "progress.png"
    plot.write_progress_png(POINTS, path, title="Example Run: 7 candidates")
    pixels = (imread(path)[:, :, :3] * 255).round().astype(int)
    fig = plot.figure(POINTS, title="Example Run: 7 candidates")
    ax = fig.axes[0]
    fig.canvas.draw()

    def at(x: float, y: float) -> tuple[int, int, int]:
        px, py = ax.transData.transform((x, y))
        return tuple(pixels[round(plot.H - py)][round(px)])

    return path, pixels, at


def near(c, target, tol=40):
    return all(abs(a - b) <= tol for a, b in zip(c, target))


def test_valid_png_of_the_stated_size(chart):
    path, pixels, _ = chart
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pixels.shape[:2] == (plot.H, plot.W) == (450, 800)


def test_background_is_white(chart):
    _, pixels, at = chart
    assert tuple(pixels[0][0]) == tuple(pixels[-1][-1]) == (255, 255, 255)
    assert at(1.5, 0.93) == (255, 255, 255)  # inside the plot, above every point, off the grid lines


def test_each_scored_candidate_is_a_dot_of_its_status_colour(chart):
    _, _, at = chart
    for p in POINTS:
        if p["score"] is not None:
            assert near(at(p["iteration"], p["score"]), rgb(plot.COLORS[p["status"]])), p


def test_running_best_steps_from_kept_candidates_only(chart):
    _, _, at = chart
    best = rgb(plot.BEST)
    assert near(at(1.5, 0.40), best)   # baseline's score held until the first accepted candidate
    assert near(at(4.5, 0.60), best)   # the inconclusive 0.62 does not move it
    assert near(at(6.8, 0.80), best)   # the last accepted score, held to the last candidate
    assert not near(at(4.5, 0.62), best)


def test_unscored_candidates_sit_below_zero_and_pending_is_not_drawn(chart):
    _, _, at = chart
    assert near(at(3, plot.UNSCORED_Y), rgb(plot.COLORS["invalid"]))  # never validated: a triangle below 0
    assert near(at(5, plot.UNSCORED_Y), rgb(plot.COLORS["rejected"]))
    assert at(7, plot.UNSCORED_Y) == rgb(plot.GRID)  # pending: not a candidate yet, only the grid line there


def test_an_empty_experiment_still_draws(tmp_path):
    plot.write_progress_png([], tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0
