"""The outer-loop seam of meta_agent/optimize.py. A strategy that steers the search itself (bilevel)
has `bind(view)` (a read-only SearchView, meta_agent/search/view.py) returning an object with these
calls; every other strategy gets NoSearch, whose calls change nothing, so the loop calls them
unconditionally."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from metaopt.meta_agent.search.view import SearchView

if TYPE_CHECKING:
    from metaopt.meta_agent.proposers.base import Revision
    from metaopt.meta_agent.records import Candidate, CandidateView


class Search(Protocol):
    def begin(self, iteration: int, views: list[CandidateView], /) -> None:
        """Start of an iteration, before the parent is picked."""

    def guidance(self, parent: CandidateView, /) -> str | None:
        """Text for the proposer's prompt (None: nothing)."""

    def filter(self, revision: Revision, parent: Candidate | CandidateView, cid: str, /) -> str | None:
        """Why to drop `revision` before any trial (None: keep)."""

    def on_result(self, candidate: Candidate, /) -> None:
        """`candidate`'s final decision is known."""

    def active(self) -> list[str]:
        """Hashes of the mechanisms applied in this iteration (recorded on the candidate)."""
        ...

    def finish(self) -> dict[str, Any]:
        """The run ends: judge what is pending, close what runs; a summary for the report."""
        ...


class NoSearch:
    def begin(self, iteration: int, views: list[CandidateView]) -> None:
        pass

    def guidance(self, parent: CandidateView) -> None:
        return None

    def filter(self, revision: Revision, parent: Candidate | CandidateView, cid: str) -> None:
        return None

    def on_result(self, candidate: Candidate) -> None:
        pass

    def active(self) -> list[str]:
        return []

    def finish(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def bind_search(strategy: Any, view: SearchView) -> Search:
    bind = getattr(strategy, "bind", None)
    return bind(view) if bind else NoSearch()
