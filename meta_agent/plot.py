"""progress.png: one dot per candidate (x = iteration, y = validation score) and a step line for
the running best, in the spirit of karpathy/autoresearch's progress chart.

Standard library only (zlib + struct write the PNG; a 5x7 bitmap font draws the text), so the
optimizer can refresh the chart after every decision without matplotlib or Pillow installed.
Pixel-exact, no anti-aliasing: it is a glance-at-it chart, not a figure for a paper.
"""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

W, H = 800, 450
LEFT, RIGHT, TOP, BOTTOM = 92, 184, 40, 58  # margins: tick labels + axis titles, legend on the right
Y_LO, Y_HI = -0.06, 1.04  # pad the [0, 1] range so dots at 0 or 1 are not cut by the frame
S = 2  # text scale: 5x7 glyphs drawn 10x14, legible at 800x450

WHITE, BLACK, GRID, AXIS = (255, 255, 255), (30, 30, 30), (228, 228, 228), (90, 90, 90)
COLORS = {"baseline": (31, 119, 180), "accepted": (44, 160, 44), "rejected": (190, 190, 190),
          "inconclusive": (255, 127, 14), "invalid": (214, 39, 40)}
BEST = (20, 110, 20)  # running-best line: a darker green than the accepted dots so both read
RADIUS = {"accepted": 6, "baseline": 5}  # accepted dots are larger: they are the events that moved the line
DOT_R = 4

# 5x7 font (HD44780-style). Each glyph is 7 rows, 2 hex digits a row, bit 4 = leftmost pixel.
# Lower case only: upper case is folded to lower, anything unknown draws as '?'.
_FONT_HEX = """
0:0e11131519110e 1:040c040404040e 2:0e11010204081f 3:1f02040201110e 4:02060a121f0202
5:1f101e0101110e 6:0608101e11110e 7:1f010204080808 8:0e11110e11110e 9:0e11110f01020c
a:00000e010f110f b:1010161911111e c:00000e1010110e d:01010d1311110f e:00000e111f100e
f:0609081c080808 g:000f11110f010e h:10101619111111 i:04000c0404040e j:0200060202120c
k:10101214181412 l:0c04040404040e m:00001a15151111 n:00001619111111 o:00000e1111110e
p:00001e111e1010 q:00000d130f0101 r:00001619101010 s:00000e100e011e t:08081c08080906
u:0000111111130d v:00001111110a04 w:0000111115150a x:0000110a040a11 y:000011110f010e
z:00001f0204081f .:00000000000c0c -:0000001f000000 ,:00000000000c04 ?:0e110102040004
(:02040808080402 ):08040202020408 %:18190204081303 =:00001f001f0000 _:0000000000001f
+:0004041f040400 /:00010204081000 colon:000c0c000c0c00 space:00000000000000
"""
_NAMES = {"colon": ":", "space": " "}  # characters that would be awkward as "c:hex" tokens
FONT = {_NAMES.get(c, c): [int(h[i:i + 2], 16) for i in range(0, 14, 2)]
        for c, h in (tok.rsplit(":", 1) for tok in _FONT_HEX.split())}


class Canvas:
    def __init__(self, w: int, h: int):
        self.w, self.h = w, h
        self.px = bytearray(WHITE * (w * h))

    def set(self, x: int, y: int, c: tuple[int, int, int]) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:  # clip silently: callers need not bounds-check
            i = 3 * (y * self.w + x)
            self.px[i:i + 3] = bytes(c)

    def rect(self, x0: int, y0: int, x1: int, y1: int, c) -> None:
        """Filled, inclusive of both corners."""
        for y in range(min(y0, y1), max(y0, y1) + 1):
            for x in range(min(x0, x1), max(x0, x1) + 1):
                self.set(x, y, c)

    def line(self, x0: int, y0: int, x1: int, y1: int, c, width: int = 1) -> None:
        """Bresenham, thickened by stamping a width x width square at each step."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err, lo = dx + dy, -(width // 2)
        while True:
            self.rect(x0 + lo, y0 + lo, x0 + lo + width - 1, y0 + lo + width - 1, c)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err, x0 = err + dy, x0 + sx
            if e2 <= dx:
                err, y0 = err + dx, y0 + sy

    def disc(self, cx: int, cy: int, r: int, c, edge=None) -> None:
        for y in range(-r, r + 1):
            for x in range(-r, r + 1):
                d = x * x + y * y
                if d <= r * r + r:  # "+ r" rounds the rim so small discs are not diamonds
                    inner = edge is None or d <= (r - 1) * (r - 1) + (r - 1)
                    self.set(cx + x, cy + y, c if inner else edge)

    def cross(self, cx: int, cy: int, r: int, c) -> None:
        self.line(cx - r, cy - r, cx + r, cy + r, c, 2)
        self.line(cx - r, cy + r, cx + r, cy - r, c, 2)

    def text(self, x: int, y: int, s: str, c=BLACK, scale: int = S, vertical: bool = False) -> None:
        """Top-left at (x, y). vertical = rotated 90 degrees counter-clockwise, read bottom to top,
        with (x, y) the bottom-left; used for the y-axis title."""
        for k, ch in enumerate(s.lower()):
            rows = FONT.get(ch, FONT["?"])
            for r, bits in enumerate(rows):
                for col in range(5):
                    if bits >> (4 - col) & 1:
                        gx, gy = 6 * k + col, r  # glyph cell is 6 wide: 5 pixels + 1 spacing
                        px, py = (x + gy * scale, y - gx * scale) if vertical else (x + gx * scale, y + gy * scale)
                        self.rect(px, py, px + scale - 1, py + scale - 1, c)

    def png(self) -> bytes:
        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        stride = 3 * self.w
        raw = b"".join(b"\x00" + bytes(self.px[y * stride:(y + 1) * stride]) for y in range(self.h))  # filter 0
        ihdr = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def text_width(s: str, scale: int = S) -> int:
    return (6 * len(s) - 1) * scale


def _x_step(n: int) -> int:
    """A 1-2-5 tick step giving at most ~10 ticks on 0..n."""
    mag = 1
    while True:
        for m in (1, 2, 5):
            if n / (m * mag) <= 10:
                return m * mag
        mag *= 10


class Frame:
    """Maps (iteration, score) to pixels; exposed so tests can find a point on the image."""

    def __init__(self, points: list[dict]):
        self.n = max([int(p["iteration"]) for p in points] + [1])
        self.x0, self.x1, self.y0, self.y1 = LEFT, W - RIGHT, TOP, H - BOTTOM

    def px(self, it: float, score: float) -> tuple[int, int]:
        fx = (it + 0.5) / (self.n + 1)  # half a slot of padding so iteration 0 is off the y axis
        fy = (score - Y_LO) / (Y_HI - Y_LO)
        return round(self.x0 + fx * (self.x1 - self.x0)), round(self.y1 - fy * (self.y1 - self.y0))


def _score(p: dict) -> float | None:
    s = p.get("score")
    if s is None or not math.isfinite(s):
        return None
    return min(1.0, max(0.0, float(s)))


def _marker(cv: Canvas, st: str, x: int, y: int, scored: bool = True) -> None:
    c = COLORS[st]
    if st == "invalid":
        cv.cross(x, y, 4 if scored else 3, c)  # an X, not a dot: it never got a fair score
    elif not scored:
        cv.rect(x - 1, y - 3, x + 1, y + 3, c)  # a short tick: present, but not a score to compare
    else:  # a darker rim keeps touching dots apart; grey rejects stay flat so they recede
        cv.disc(x, y, RADIUS.get(st, DOT_R), c, None if st == "rejected" else tuple(v * 3 // 4 for v in c))


def write_progress_png(points: list[dict], path: Path, *, title: str | None = None) -> None:
    """Draw the chart and write it to `path`. Points need `iteration`, `status`, `score`; a score
    of None (never reached validation: screened out, invalid) is drawn as a small mark on the
    bottom strip below 0 rather than dropped, so every proposal the optimizer made stays visible.
    Pending candidates (and any status not in COLORS) get no dot."""
    pts = sorted(points, key=lambda p: int(p["iteration"]))
    f, cv = Frame(pts), Canvas(W, H)
    for g in (0, 0.25, 0.5, 0.75, 1.0):  # grid + y ticks
        _, y = f.px(0, g)
        cv.line(f.x0, y, f.x1, y, GRID)
        cv.line(f.x0 - 5, y, f.x0, y, AXIS)
        label = f"{g:.2f}"
        cv.text(f.x0 - 9 - text_width(label), y - 7, label)
    step = _x_step(f.n)
    for it in range(0, f.n + 1, step):  # x ticks
        x, _ = f.px(it, 0)
        cv.line(x, f.y1, x, f.y1 + 5, AXIS)
        cv.text(x - text_width(str(it)) // 2, f.y1 + 9, str(it))
    cv.line(f.x0, f.y0, f.x0, f.y1, AXIS)
    cv.line(f.x0, f.y1, f.x1, f.y1, AXIS)
    cv.text((f.x0 + f.x1 - text_width("candidate")) // 2, H - 20, "candidate", AXIS)
    cv.text(8, (f.y0 + f.y1 + text_width("validation score")) // 2, "validation score", AXIS, vertical=True)
    if title:
        t = title if text_width(title) <= W - 16 else title[:(W - 16) // (6 * S) - 1] + "-"
        cv.text(min(max(8, (f.x0 + f.x1 - text_width(t)) // 2), W - 8 - text_width(t)), 12, t)

    # Running best: the latest accepted score (the baseline's before any), held until the last candidate.
    best, prev = None, None
    for p in pts:
        s = _score(p)
        if p["status"] in ("baseline", "accepted") and s is not None:
            x, y = f.px(p["iteration"], s)
            if prev:
                cv.line(prev[0], prev[1], x, prev[1], BEST, 2)
                cv.line(x, prev[1], x, y, BEST, 2)
            best, prev = s, (x, y)
    if prev:
        cv.line(prev[0], prev[1], f.px(pts[-1]["iteration"], 0)[0], prev[1], BEST, 2)

    # Dots, quietest first so grey rejects never hide a coloured point they overlap.
    order = ["rejected", "inconclusive", "invalid", "baseline", "accepted"]
    for p in sorted((p for p in pts if p["status"] in COLORS), key=lambda p: order.index(p["status"])):
        s = _score(p)
        x, y = f.px(p["iteration"], s if s is not None else Y_LO / 2)  # unscored: on the strip below 0
        _marker(cv, p["status"], x, y, scored=s is not None)

    # Legend in the right margin: one row per status, the bottom-strip tick, then the best line.
    lx, ly = f.x1 + 14, f.y0 + 4
    for st in COLORS:
        _marker(cv, st, lx + 6, ly + 7)
        cv.text(lx + 18, ly, st)
        ly += 24
    _marker(cv, "rejected", lx + 6, ly + 7, scored=False)
    cv.text(lx + 18, ly, "unscored")
    ly += 24
    cv.line(lx, ly + 7, lx + 12, ly + 7, BEST, 2)
    cv.text(lx + 18, ly, "best" if best is None else f"best {best:.3f}")
    Path(path).write_bytes(cv.png())
