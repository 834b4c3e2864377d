"""The meta-agent's edit tools: change the session's draft of the parent one validated step at a
time (meta_agent.proposers.edits.Draft); write_revision without a full harness submits the draft.

  set_field(path, value), edit_prompt(prompt, text, section, old), set_tool(name, **fields), remove_tool(name)
"""

from __future__ import annotations

from typing import Any

from metaopt.core.errors import ToolError
from metaopt.meta_agent.proposers.llm_tools_base import SessionBase


class EditTools(SessionBase):
    def set_field(self, path: str, value: Any) -> str:
        return self.draft.set_field(path, value)

    def edit_prompt(self, prompt: str, text: str, section: str | None = None, old: str | None = None) -> str:
        if not isinstance(text, str):
            raise ToolError("text must be a string")
        return self.draft.edit_prompt(prompt, text, section=section or None, old=old or None)

    def set_tool(self, name: str, **fields: Any) -> str:
        return self.draft.set_tool(name, **fields)

    def remove_tool(self, name: str) -> str:
        return self.draft.remove_tool(name)
