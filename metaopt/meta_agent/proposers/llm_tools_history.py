"""The meta-agent's history tools (text from meta_agent.proposers.history_view): every earlier
candidate of the experiment with per-task TRAIN results; validation only as the gate's aggregate
numbers, test never; and the notebook.

  history(), read_candidate(candidate_id), compare_train_task(task_id, a, b), add_note(text)
"""

from __future__ import annotations

from metaopt.core.errors import ToolError
from metaopt.meta_agent.proposers import history as hist
from metaopt.meta_agent.proposers import history_view as view
from metaopt.meta_agent.proposers.llm_tools_base import SessionBase


class HistoryTools(SessionBase):
    def history(self) -> str:
        self.records = hist.load(self.store, self.experiment_id)  # outcomes written since (candidates in flight)
        return view.history_text(self.records, clip=self.profile.clip)

    def read_candidate(self, candidate_id: str) -> str:
        self.records = hist.load(self.store, self.experiment_id)  # outcomes written since (candidates in flight)
        rec = view.find(self.records, candidate_id)
        return view.candidate_text(rec, hist.notes(self.store, self.experiment_id), clip=self.profile.clip * 6)

    def compare_train_task(self, task_id: str, a: str, b: str) -> str:
        self.records = hist.load(self.store, self.experiment_id)  # outcomes written since (candidates in flight)
        return view.compare_text(self.store, self.experiment_id, self.records, task_id, a, b,
                                 clip=self.profile.clip * 5)

    def add_note(self, text: str) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ToolError("text must be a non-empty string")
        n = hist.add_note(self.store, self.experiment_id, text, parent_id=self.parent_id, trace_id=self.trace_id)
        return f"noted (#{n.seq})"
