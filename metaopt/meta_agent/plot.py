"""progress.png: one dot per candidate (x = iteration, y = validation score) and a step line for
the running best, in the spirit of karpathy/autoresearch's progress chart. Drawn with matplotlib's
Agg backend (no display needed); refreshed at the end of every experiment.

Points are dicts: `iteration`, `status` (baseline | accepted | rejected | inconclusive | invalid |
pending) and `score` (validation mean, or None when the candidate never reached validation:
drawn as a small triangle on a strip below 0).
"""

from __future__ import annotations

from pathlib import Path

W, H, DPI = 800, 450, 100
COLORS = {"baseline": "#1f77b4", "accepted": "#2ca02c", "rejected": "#bebebe", "inconclusive": "#ff7f0e",
          "invalid": "#d62728"}
GRID = "#e4e4e4"
BEST = "#146e14"  # the running-best line: darker than the accepted dots so both read
UNSCORED_Y = -0.03  # the strip below 0 where candidates without a validation score sit
ORDER = ["rejected", "inconclusive", "invalid", "baseline", "accepted"]  # quietest drawn first


def figure(points: list[dict], *, title: str | None = None):
    """The chart as a matplotlib Figure (800 x 450 px at 100 dpi)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(W / DPI, H / DPI), dpi=DPI, facecolor="white")
    ax = fig.add_axes((0.09, 0.13, 0.70, 0.77))
    last = max((p["iteration"] for p in points), default=0)
    ax.set_xlim(-0.5, max(last, 1) + 0.5)
    ax.set_ylim(-0.06, 1.04)
    ax.grid(True, color=GRID, linewidth=0.8)
    ax.set_axisbelow(True)
    ax.set_xlabel("iteration")
    ax.set_ylabel("validation score")
    ax.axhline(0, color="#5a5a5a", linewidth=0.6)
    if title:
        ax.set_title(title, fontsize=10)

    best, xs, ys = None, [], []  # running best: the latest kept score, held to the last candidate
    for p in points:
        if p["status"] in ("baseline", "accepted") and p.get("score") is not None:
            best = p["score"]
            xs.append(p["iteration"])
            ys.append(best)
    if xs:
        ax.step(xs + [last], ys + [ys[-1]], where="post", color=BEST, linewidth=2,
                label=f"best {best:.3f}", zorder=2)
    for status in ORDER:
        mine = [p for p in points if p["status"] == status]
        scored = [p for p in mine if p.get("score") is not None]
        size = 80 if status == "accepted" else 55 if status == "baseline" else 36
        ax.scatter([p["iteration"] for p in scored], [p["score"] for p in scored], s=size, color=COLORS[status],
                   label=status, zorder=3, edgecolors="none")
        unscored = [p for p in mine if p.get("score") is None]
        if unscored:
            ax.scatter([p["iteration"] for p in unscored], [UNSCORED_Y] * len(unscored), s=30, marker="v",
                       color=COLORS[status], zorder=3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, fontsize=9)
    return fig


def write_progress_png(points: list[dict], path: Path, *, title: str | None = None) -> None:
    figure(points, title=title).savefig(Path(path), dpi=DPI, facecolor="white")
