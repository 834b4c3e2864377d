"""Tool calls written in the reply text: the fallback when a server returns none in `tool_calls`.

Small models often write their call as text instead of in the provider's tool-call format:
a fenced JSON block (```json {"name": "bash", "arguments": {...}} ```), Qwen/Hermes
`<tool_call>...</tool_call>` tags, or a bare JSON object as the whole reply. `recover()` turns
those into ToolCallParts and removes them from the text. Contracts:

- Never raises. A block that is meant as a call but is not valid JSON (or whose arguments are
  not an object) becomes a ToolCallPart with `arguments_error` saying why and quoting the text,
  so the loop answers it with a tool error the model sees.
- `with_text_calls(response, tools)` applies this to a ModelResponse that has no tool calls and
  notes the raw output in `unparsed_output` whenever a call was not parsed by the server (a reply
  cut off at max_tokens keeps finish_reason "length", so a caller can tell a cut-off call);
  `TextToolCalls(model)` wraps any Model with it (LocalModel does the same).
- Only call-shaped JSON counts: an object with a string `name` and `arguments` (or `parameters`),
  or a list of such objects. Inside <tool_call> tags `name` alone is enough. Other fenced JSON
  (a package.json the model shows, say) stays text.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metaopt.task_agent.messages import Message, ModelResponse, ModelSettings, TextPart, ToolCallPart, ToolSpec

if TYPE_CHECKING:
    from metaopt.task_agent.models.base import Model

_FENCE = re.compile(r"```[ \t]*(json|tool_call|tool|)[ \t]*\r?\n(.*?)(?:\r?\n[ \t]*```|\Z)", re.DOTALL | re.IGNORECASE)
_TAGS = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,100})"')
INVALID = "invalid_tool_call"


@dataclass
class Recovered:
    """What `recover()` found: the calls (in order), the text left once their blocks are gone,
    and whether any block was meant as a call but could not be parsed."""

    calls: list[ToolCallPart] = field(default_factory=list)
    text: str = ""
    malformed: int = 0


def recover(text: str, *, id_prefix: str = "text-call") -> Recovered:
    """Tool calls written in `text` (see the module docstring)."""
    found: list[tuple[int, int, list[ToolCallPart] | None]] = []  # (start, end, calls or None = not a call)
    spans: list[tuple[int, int, str, bool]] = []  # (start, end, body, tagged)
    for m in _TAGS.finditer(text):
        spans.append((m.start(), m.end(), m.group(1), True))
    for m in _FENCE.finditer(text):
        if not any(s <= m.start() < e for s, e, _, _ in spans):
            spans.append((m.start(), m.end(), m.group(2), False))
    if not spans and text.strip().startswith(("{", "[")):
        start = len(text) - len(text.lstrip())
        spans.append((start, len(text.rstrip()), text.strip(), False))
    out = Recovered()
    for start, end, body, tagged in sorted(spans):
        calls, malformed = _parse_block(body, tagged, f"{id_prefix}-{len(out.calls)}")
        if calls is None:
            continue
        out.calls.extend(calls)
        out.malformed += malformed
        found.append((start, end, calls))
    if not found:
        out.text = text
        return out
    pieces, pos = [], 0
    for start, end, _ in found:
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    out.text = "".join(pieces).strip()
    return out


def _parse_block(body: str, tagged: bool, call_id: str) -> tuple[list[ToolCallPart] | None, int]:
    """(calls, malformed count), or (None, 0) when the block is not meant as a call."""
    body = body.strip()
    if fenced := _FENCE.fullmatch(body):  # <tool_call>```json ...```</tool_call>
        body = fenced.group(2).strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        if not (tagged or ('"name"' in body and ('"arguments"' in body or '"parameters"' in body))):
            return None, 0
        m = _NAME.search(body)
        reason = f"the tool call in your reply is not valid JSON ({exc.msg} at char {exc.pos}): {body[:2000]}"
        return [ToolCallPart(id=call_id, name=m.group(1) if m else INVALID, arguments_error=reason)], 1
    items = value if isinstance(value, list) else [value]
    if not items or not all(_is_call(v, tagged) for v in items):
        return None, 0
    calls, malformed = [], 0
    for i, item in enumerate(items):
        arguments, error = _arguments(item.get("arguments", item.get("parameters")))
        malformed += error is not None
        calls.append(ToolCallPart(id=f"{call_id}-{i}" if len(items) > 1 else call_id, name=item["name"],
                                  arguments=arguments, arguments_error=error))
    return calls, malformed


def _is_call(value: Any, tagged: bool) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("name"), str) and bool(value["name"])
            and (tagged or "arguments" in value or "parameters" in value))


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    if raw is None:
        return {}, None
    if isinstance(raw, str):  # the OpenAI wire form: arguments as a JSON string
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return {}, f"invalid JSON in tool arguments ({exc.msg} at char {exc.pos}): {raw[:2000]}"
    if not isinstance(raw, dict):
        return {}, f"tool arguments must be a JSON object, got {type(raw).__name__}: {json.dumps(raw)[:2000]}"
    return raw, None


def with_text_calls(response: ModelResponse, tools: list[ToolSpec]) -> ModelResponse:
    """`response` with the tool calls its text holds (when the server returned none), and the raw
    output in `unparsed_output` whenever the server did not parse a call: a call left in the
    text, or tool_calls whose arguments are not a JSON object."""
    msg = response.message
    if msg.tool_calls:
        bad = [c.arguments_error for c in msg.tool_calls if c.arguments_error]
        return response.model_copy(update={"unparsed_output": "\n".join(bad)}) if bad else response
    if not tools or not msg.text.strip():
        return response
    found = recover(msg.text, id_prefix=f"call-{uuid.uuid4().hex[:12]}")  # unique in the history
    if not found.calls:
        return response
    parts: list[Any] = [p for p in msg.parts if not isinstance(p, TextPart)]
    if found.text:
        parts.append(TextPart(content=found.text))
    parts.extend(found.calls)
    finish = "length" if response.finish_reason == "length" else "tool_call"  # a reply cut off stays cut off
    return response.model_copy(update={
        "message": Message(role="assistant", parts=parts), "finish_reason": finish, "unparsed_output": msg.text})


class TextToolCalls:
    """Any Model, with tool calls written in its text recovered (see `with_text_calls`)."""

    def __init__(self, model: Model):
        self.model, self.name, self.provider = model, model.name, model.provider

    def generate(self, messages: list[Message], tools: list[ToolSpec],
                 settings: ModelSettings) -> ModelResponse:
        return with_text_calls(self.model.generate(messages, tools, settings), tools)
