"""meta_agent.plot: the stdlib-only progress.png writer. The PNG is decoded here by hand (zlib +
struct) so the test checks the file format itself, not a library's tolerance of it."""

import struct
import zlib
from pathlib import Path

import pytest

from meta_agent import plot

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


def decode(path: Path) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """Parse a PNG as plot writes it (8-bit RGB, filter 0): check every chunk, return w, h, rows."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        pos += 12 + n
    kinds = [k for k, _ in chunks]
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    w, h, depth, color, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, color, comp, filt, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    assert len(raw) == h * (1 + 3 * w)
    rows = []
    for y in range(h):
        line = raw[y * (1 + 3 * w):(y + 1) * (1 + 3 * w)]
        assert line[0] == 0  # the writer only emits filter type 0 (None)
        rows.append(Row(line[1:]))
    return w, h, rows


class Row(bytes):
    """One decoded scanline; row[x] is the (r, g, b) of pixel x."""

    def __getitem__(self, x):
        x = x % (len(self) // 3)
        return tuple(bytes.__getitem__(self, slice(3 * x, 3 * x + 3)))


@pytest.fixture(scope="module")
def chart(tmp_path_factory):
    path = tmp_path_factory.mktemp("plot") / "progress.png"
    plot.write_progress_png(POINTS, path, title="Example Run: 7 candidates")
    w, h, rows = decode(path)
    return w, h, rows, plot.Frame(POINTS)


def test_valid_png_of_the_stated_size(chart):
    w, h, rows, _ = chart
    assert (w, h) == (plot.W, plot.H) == (800, 450)
    assert len(rows) == h and all(len(r) == 3 * w for r in rows)


def test_background_is_white(chart):
    _, _, rows, f = chart
    assert rows[0][0] == rows[-1][-1] == rows[2][plot.W // 2 - 300] == (255, 255, 255)
    x, y = f.px(1, 0.9)  # inside the plot, between grid lines, above every point
    assert rows[y][x] == (255, 255, 255)


def green_ish(c):
    r, g, b = c
    return g > r + 60 and g > b + 60


def test_accepted_points_are_green_and_larger(chart):
    _, _, rows, f = chart
    for it, score in ((2, 0.60), (6, 0.80)):
        x, y = f.px(it, score)
        assert green_ish(rows[y][x])
        assert green_ish(rows[y][x + plot.RADIUS["accepted"] - 2])  # wider than a plain dot
    x, y = f.px(1, 0.30)  # rejected: light grey, and plain-sized
    assert rows[y][x] == plot.COLORS["rejected"]
    assert rows[y][x + plot.DOT_R + 2] == (255, 255, 255)


def test_status_colours_step_line_and_pending(chart):
    _, _, rows, f = chart
    x, y = f.px(0, 0.40)
    assert rows[y][x] == plot.COLORS["baseline"]
    x, y = f.px(4, 0.62)
    assert rows[y][x] == plot.COLORS["inconclusive"]
    x, y = f.px(3, plot.Y_LO / 2)  # invalid, no score: a red X on the strip below 0
    assert rows[y][x] == rows[y + 3][x + 3] == rows[y - 3][x + 3] == plot.COLORS["invalid"]  # an X: arms too
    x, y = f.px(5, plot.Y_LO / 2)  # rejected, no score: a grey tick on the same strip
    assert rows[y][x] == plot.COLORS["rejected"]
    x, y = f.px(7, plot.Y_LO / 2)  # pending: nothing drawn
    assert rows[y][x] == (255, 255, 255)
    # running best: holds 0.40 from the baseline to the first accept, and 0.80 out to the last candidate
    (x0, y0), (x1, _) = f.px(0, 0.40), f.px(2, 0.60)
    assert rows[y0][(x0 + x1) // 2] == plot.BEST
    (x6, y6), (x7, _) = f.px(6, 0.80), f.px(7, 0.80)
    assert rows[y6][(x6 + x7) // 2 + 4] == plot.BEST


def test_empty_list_still_draws_axes(tmp_path):
    path = tmp_path / "empty.png"
    plot.write_progress_png([], path)
    w, h, rows = decode(path)
    assert (w, h) == (800, 450)
    f = plot.Frame([])
    mid = (f.y0 + f.y1) // 2
    assert rows[mid][f.x0] == plot.AXIS  # y axis
    assert rows[f.y1][(f.x0 + f.x1) // 2] == plot.AXIS  # x axis
    _, y = f.px(0, 0.5)
    assert rows[y][(f.x0 + f.x1) // 2] == plot.GRID
    assert any(rows[y][x] == plot.BLACK for y in range(f.y0, f.y1) for x in range(f.x0))  # y tick labels


def test_font_covers_the_labels_and_odd_titles_do_not_fail(tmp_path):
    needed = set("0123456789.-") | set("candidate validation score best") | set("".join(plot.COLORS))
    assert needed <= set(plot.FONT)
    assert all(len(g) == 7 and all(0 <= r < 32 for r in g) for g in plot.FONT.values())
    path = tmp_path / "odd.png"
    weird = [{"iteration": 0, "status": "baseline", "score": 1.7}, {"iteration": 40, "status": "weird", "score": 0.5},
             {"iteration": 41, "status": "accepted", "score": float("nan")}]
    plot.write_progress_png(weird, path, title="Ünïcode & a very long title " * 10)
    assert decode(path)[:2] == (800, 450)
