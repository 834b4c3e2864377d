"""Every metaopt error, grouped by who it is for.

- **User mistakes** (`UserError`): a bad flag, file, name or missing extra. Raised before anything
  is recorded (or leaving what is recorded intact); the CLI prints the message as one line and
  exits 2. `field` names the option or file at fault when the raiser knows it.
- **Sent back to a model** (`ToolError`): a meta-agent tool call that cannot be honoured; the
  model sees the message and may try again. Never escapes a proposal.
- **Per-task failures** (`TaskFailure`): an image that does not build, a sandbox that died. The
  trial runner turns each into a trial row (status `error`, the message in `error`); they never
  escape a trial. Model API failures inside an episode are recorded the same way by the agent.
- **Systemic failures** (`SystemicError`): the run cannot go on (model requests switched off, a
  meta-model that keeps failing). Raised; the optimizer stops cleanly and can be resumed.

Exceptions that must not be caught as any of these (KeyboardInterrupt, bugs) stay what they are.
Files copied into sandboxes stand alone and keep their own (benchmarks/spreadsheet/compare.py).
"""

from __future__ import annotations


class MetaoptError(Exception):
    """Base of every error metaopt raises on purpose."""


# -- user mistakes: one line, exit 2 ---------------------------------------------------------------
class UserError(MetaoptError, ValueError):
    """A user mistake. `str(e)` is one line; `field` (e.g. "--harness") is prefixed by the CLI."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def line(self) -> str:
        """The one line the CLI prints."""
        text = " ".join(str(self).split("\n")[0].split())
        return f"{self.field}: {text}" if self.field else text


class MissingExtra(UserError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, what: str, extra: str, module: str | None = None) -> None:
        missing = f" ({module} is not installed)" if module else ""
        super().__init__(f"{what} needs the '{extra}' extra{missing}: pip install 'metaopt[{extra}]'")
        self.extra = extra


class UnknownName(UserError):
    """A registry has no implementation of that name; the message lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str], hint: str = "") -> None:
        super().__init__(f"unknown {kind} '{name}' (known: {', '.join(known)}){hint}")
        self.kind, self.name, self.known = kind, name, known


class BenchmarkError(UserError):
    """Bad benchmark name, dataset path or task selection."""


class UnknownBenchmark(UnknownName, BenchmarkError):
    """No benchmark of that name."""


class SplitError(UserError):
    """A bad --split, or too few tasks to split."""


class HarnessError(UserError):
    """An invalid or unreadable harness, reported in one line naming the file and the field path."""


class StoreError(UserError):
    """The store file cannot be used (missing, corrupt, locked, newer schema)."""


class ExportError(UserError):
    """A candidate or folder that cannot be exported in the format asked for."""


class UnknownFormat(UnknownName, ExportError):
    """No export format of that name."""


class ExecutorError(UserError):
    """An executor that cannot run: an unknown name, no Ray cluster at the address."""


class ModelConfigError(UserError):
    """A model name, base URL or setting is wrong; the message names what to fix."""


class MissingApiKey(ModelConfigError):
    """The provider's API key environment variable is not set. The message never holds a key."""

    def __init__(self, env_var: str) -> None:
        super().__init__(f"{env_var} is not set")
        self.env_var = env_var


class UnknownProvider(ModelConfigError):
    """The `provider/` prefix of a model name is not registered."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown model provider in {name!r}; known providers: {', '.join(sorted(known))} "
                         "(names are provider/model)")
        self.known = sorted(known)


# -- sent back to a model --------------------------------------------------------------------------
class ToolError(MetaoptError):
    """A meta-agent tool call that cannot be honoured; its message goes back to the model."""


class EditError(ToolError):
    """A structured harness edit that cannot be applied (meta_agent.proposers.edits); the draft is
    left as it was."""


# -- per-task failures: a trial row, never raised out of a trial -----------------------------------
class TaskFailure(MetaoptError):
    """Something about one task's trial failed outside the agent's control."""


class SandboxError(TaskFailure):
    """A sandbox operation failed for a reason outside the command being run."""


class ImageNotFound(SandboxError):
    """An image is not present locally, cannot be pulled, and the image map has no entry for it."""


class ImageBuildError(SandboxError):
    """An image build failed; the message names the failing step and ends with the log tail."""


class SandboxUnavailable(SandboxError, UserError):
    """The backend cannot be reached at all (no Docker daemon, no permission). Not per-task: the
    whole run stops before (or as soon as) it notices; the CLI says how to fix it, exit 2."""

    def __init__(self, message: str) -> None:
        UserError.__init__(self, message)


# -- systemic: the run cannot go on ----------------------------------------------------------------
class SystemicError(MetaoptError, RuntimeError):
    """The run cannot go on; raised, and the optimizer stops cleanly (resumable)."""


class ModelRequestsBlocked(SystemicError):
    """A real model request was attempted while model requests are switched off (tests)."""


class ModelError(SystemicError):
    """A model API call failed for good: a non-retryable error, or retries ran out. Inside a task
    episode the agent records it as the episode's outcome (a per-task failure row).

    `error_type` is low-cardinality (the provider's error type, e.g. "rate_limit_error", or
    "connection_error" / "timeout") and fits OTel `error.type`."""

    def __init__(self, message: str, *, provider: str, error_type: str,
                 status_code: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.provider, self.error_type = provider, error_type
        self.status_code, self.attempts = status_code, attempts


# -- placed here so that every error is in one module ------------------------------------------------
class TaskFormatError(UserError):
    """A task directory is malformed; the message names the file and the field. Loading a whole
    dataset records each such task as a TaskLoadError row instead of raising."""


class DataError(BenchmarkError):
    """A data dir holds no usable text (gptpretrain --dataset)."""


class InspectLoadError(BenchmarkError):
    """An inspect module, task or the inspect-ai install is unusable."""


class BadRequest(UserError):
    """A missing or malformed query parameter to the explorer's HTTP API (answered with 400)."""
