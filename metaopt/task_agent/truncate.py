"""Head+tail truncation of tool output: the start of an output says what ran, the end says how
it finished (errors, summaries), the middle is usually the least informative part."""

from __future__ import annotations


def omission_marker(omitted: int) -> str:
    """The line that replaces the cut middle; spans and the heuristic proposer grep for it."""
    return f"[... {omitted} characters omitted ...]"


def truncate_middle(text: str, limit: int) -> tuple[str, bool]:
    """Keep `limit` characters of `text` in total, half from the head and half from the tail,
    joined by a marker line naming how many characters were cut. Returns (text, truncated).
    The marker is not counted in `limit`. Texts of at most `limit` characters come back as is."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if len(text) <= limit:
        return text, False
    head = limit // 2
    tail = limit - head
    omitted = len(text) - limit
    return f"{text[:head]}\n{omission_marker(omitted)}\n{text[len(text) - tail:]}", True
