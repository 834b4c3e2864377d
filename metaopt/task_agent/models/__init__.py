"""Model registry: `get_model("provider/model")` -> a Model.

Built-in providers: anthropic, openai, openai-compatible, fake, local (`local/<name>`, or
`local:/path/to/model.gguf`: a name may be written `provider:model` when the model is a path).
Plugins add providers through the `metaopt.models` entry-point group; each entry point names a factory
`factory(model: str, *, base_url: str | None, context: dict | None) -> Model`, exactly as the
built-ins below do. Nothing is imported until a provider is asked for, so importing this package
never imports an SDK.
"""

from __future__ import annotations

from typing import Any

from metaopt.core.errors import MissingApiKey, ModelConfigError, ModelError, ModelRequestsBlocked, UnknownProvider
from metaopt.core.registry import Registry

# ALLOW_MODEL_REQUESTS is not re-exported: a copy of a bool here could not switch anything off.
from metaopt.task_agent.models.base import Model, allow_model_requests, model_requests_allowed

ENTRY_POINT_GROUP = "metaopt.models"
BUILTIN_PROVIDERS: dict[str, str] = {
    "anthropic": "metaopt.task_agent.models.anthropic:create",
    "openai": "metaopt.task_agent.models.openai:create",
    "openai-compatible": "metaopt.task_agent.models.openai:create_compatible",
    "fake": "metaopt.task_agent.models.fake:create",
    "local": "metaopt.task_agent.models.local:create",
}
PROVIDERS = Registry("model provider", ENTRY_POINT_GROUP, BUILTIN_PROVIDERS)

__all__ = [
    "BUILTIN_PROVIDERS", "ENTRY_POINT_GROUP", "PROVIDERS", "MissingApiKey", "Model",
    "ModelConfigError", "ModelError", "ModelRequestsBlocked", "UnknownProvider",
    "allow_model_requests", "get_model", "model_requests_allowed", "providers", "split_name",
]


def providers() -> dict[str, str]:
    """Provider name -> "module:factory", plugins included (a built-in name cannot be replaced)."""
    return PROVIDERS.targets()


def get_model(name: str, *, base_url: str | None = None,
              context: dict[str, Any] | None = None) -> Model:
    """The model called `name` ("anthropic/claude-sonnet-4-5", "openai-compatible/qwen3",
    "fake/nop", ...).

    `base_url` points a real provider at another server (required for openai-compatible unless
    OPENAI_BASE_URL is set). `context` carries per-episode extras: `solution_commands` / `tool`
    for fake/solution, a `retry` RetryPolicy for real providers.
    Raises UnknownProvider (listing the known ones), MissingApiKey, or ModelConfigError.
    """
    provider, sep, model = split_name(name)
    if not sep or not model or provider not in PROVIDERS:
        raise UnknownProvider(name, PROVIDERS.names())
    return PROVIDERS.load(provider)(model, base_url=base_url, context=context)


def split_name(name: str) -> tuple[str, str, str]:
    """(provider, separator, model) of a model name: "local/qwen2.5-coder-0.5b" -> ("local", "/",
    ...), "local:/models/x.gguf" -> ("local", ":", "/models/x.gguf"); a ":" counts only before
    the first "/", so "fake/script:PATH" is ("fake", "/", "script:PATH")."""
    provider, sep, model = name.partition("/")
    if ":" in provider:
        provider, sep, model = name.partition(":")
    return provider, sep, model
