"""Every metaopt error, grouped by who it is for; each class's docstring starts by naming it
("For the user:", "For the model:", "For the task:", "For the system:").

- **User mistakes** (`UserError`): a bad flag, file, name or missing extra. Raised before anything
  is recorded (or leaving what is recorded intact); the CLI prints the message as one line and
  exits 2. `field` names the option or file at fault when the raiser knows it.
- **Sent back to a model** (`ToolError`): a meta-agent tool call that cannot be honoured; the
  model sees the message and may try again. Never escapes a proposal.
- **Per-task failures** (`TaskFailure`): an image that does not build, a sandbox that died. The
  trial runner turns each into a trial row (status `error`, the message in `error`); they never
  escape a trial. Model API failures inside an episode are recorded the same way by the agent;
  a candidate or a search mechanism that fails its checks is recorded too (invalid, refused).
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
    """For the user: a mistake of theirs. `str(e)` is one line; `field` (e.g. "--harness") is prefixed by the CLI."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def line(self) -> str:
        """The one line the CLI prints."""
        text = " ".join(str(self).split("\n")[0].split())
        return f"{self.field}: {text}" if self.field else text


class MissingExtra(UserError):
    """For the user: an optional dependency is not installed; the message names the extra to install."""

    def __init__(self, what: str, extra: str, module: str | None = None) -> None:
        missing = f" ({module} is not installed)" if module else ""
        super().__init__(f"{what} needs the '{extra}' extra{missing}: pip install 'metaopt[{extra}]'")
        self.extra = extra


class UnknownName(UserError):
    """For the user: a registry has no implementation of that name; the message lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str], hint: str = "") -> None:
        super().__init__(f"unknown {kind} '{name}' (known: {', '.join(known)}){hint}")
        self.kind, self.name, self.known = kind, name, known


class BenchmarkError(UserError):
    """For the user: a bad benchmark name, dataset path or task selection."""


class UnknownBenchmark(UnknownName, BenchmarkError):
    """For the user: no benchmark of that name."""


class SplitError(UserError):
    """For the user: a bad --split, or too few tasks to split."""


class HarnessError(UserError):
    """For the user: an invalid or unreadable harness, reported in one line naming the file and the field path."""


class StoreError(UserError):
    """For the user: the store file cannot be used (missing, corrupt, locked, newer schema)."""


class CaseError(UserError):
    """For the user: a meta-bench case folder that is missing or malformed (manifest, harness, traces)."""


class ExportError(UserError):
    """For the user: a candidate or folder that cannot be exported in the format asked for."""


class UnknownFormat(UnknownName, ExportError):
    """For the user: no export format of that name."""


class HarborJobError(UserError):
    """For the user: a folder that is not a readable Harbor job (no result.json / config.json, or bad JSON)."""


class ExecutorError(UserError):
    """For the user: an executor that cannot run: an unknown name, no Ray cluster at the address."""


class ModelConfigError(UserError):
    """For the user: a model name, base URL or setting is wrong; the message names what to fix."""



class WeightsError(ModelConfigError):
    """For the user: a local model's weights could not be fetched, assembled or verified; the
    message says how to fix it."""

class MissingApiKey(ModelConfigError):
    """For the user: the provider's API key environment variable is not set. The message never holds a key."""

    def __init__(self, env_var: str) -> None:
        super().__init__(f"{env_var} is not set")
        self.env_var = env_var


class UnknownProvider(ModelConfigError):
    """For the user: the `provider/` prefix of a model name is not registered."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown model provider in {name!r}; known providers: {', '.join(sorted(known))} "
                         "(names are provider/model)")
        self.known = sorted(known)


# -- sent back to a model --------------------------------------------------------------------------
class ToolError(MetaoptError):
    """For the model: a meta-agent tool call that cannot be honoured; its message goes back to the model."""


class EditError(ToolError):
    """For the model: a structured harness edit that cannot be applied (meta_agent.proposers.edits); the draft is
    left as it was."""


class NoSuchRecord(ToolError, KeyError):
    """For the model: a candidate or task a meta-agent tool was asked about is not one it may see;
    the message (naming what it may see) goes back to the model. A KeyError too, for the lookups'
    callers."""

    def __str__(self) -> str:  # the message as given, not KeyError's repr of it
        return Exception.__str__(self)


# -- per-task failures: a trial row, never raised out of a trial -----------------------------------
class TaskFailure(MetaoptError):
    """For the task: something about one task's trial failed outside the agent's control."""


class SandboxError(TaskFailure):
    """For the task: a sandbox operation failed for a reason outside the command being run."""


class ImageNotFound(SandboxError):
    """For the task: an image is not present locally, cannot be pulled, and the image map has no entry for it."""


class ImageBuildError(SandboxError):
    """For the task: an image build failed; the message names the failing step and ends with the log tail."""


class SandboxUnavailable(SandboxError, UserError):
    """For the user: the backend cannot be reached at all (no Docker daemon, no permission). Not per-task: the
    whole run stops before (or as soon as) it notices; the CLI says how to fix it, exit 2."""

    def __init__(self, message: str) -> None:
        UserError.__init__(self, message)


class ToolchainMissing(SandboxUnavailable):
    """For the user: no static busybox on the host: install busybox-static (scripts/setup.sh)."""


class CaptureRefused(SandboxError):
    """For the task: the agent's container cannot be captured within the limits (too many changed
    files, too large a writable layer): the agent's doing, recorded as its failure (score 0)."""


class ArtifactRefused(SandboxError):
    """For the task: the artifacts a separate verifier would get are over their size limit: the
    agent's doing, recorded as its failure (score 0)."""


class MountBlocked(SandboxError):
    """For the task: the verifier's container cannot start with the locked toolchain's mounts
    because the agent's files are in the way (`paths`, e.g. a directory at /etc/ld.so.preload):
    recorded as `tampered`, never a start without the mounts."""

    def __init__(self, message: str, paths: list[str]) -> None:
        super().__init__(message)
        self.paths = paths


class NotCopyable(TaskFailure):
    """For the task: this task cannot be made into a canary safely (the reason says why); another
    is chosen (benchmarks.canary). Never raised out of the canary choice."""


class VerifierBlocked(TaskFailure):
    """For the task: the verifier cannot run as designed. `verdict` (a benchmarks.scoring.Verdict)
    is the trial's: the agent's failure when its files caused it, else an error. Never a weaker
    mode that goes on; never raised out of a trial's verification."""

    def __init__(self, verdict: object) -> None:
        super().__init__(str(getattr(verdict, "error", "") or "the verifier cannot run as designed"))
        self.verdict = verdict


# -- systemic: the run cannot go on ----------------------------------------------------------------
class SystemicError(MetaoptError, RuntimeError):
    """For the system: the run cannot go on; raised, and the optimizer stops cleanly (resumable)."""


class ModelRequestsBlocked(SystemicError):
    """For the system: a real model request was attempted while model requests are switched off (tests)."""


class ModelError(SystemicError):
    """For the system: a model API call failed for good: a non-retryable error, or retries ran out. Inside a task
    episode the agent records it as the episode's outcome (a per-task failure row).

    `error_type` is low-cardinality (the provider's error type, e.g. "rate_limit_error", or
    "connection_error" / "timeout") and fits OTel `error.type`."""

    def __init__(self, message: str, *, provider: str, error_type: str,
                 status_code: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.provider, self.error_type = provider, error_type
        self.status_code, self.attempts = status_code, attempts


class HostStartError(TaskFailure):
    """For the task: a bilevel mechanism's host could not start, or its module did not load (the
    message says why). Recorded as that mechanism's refusal; never raised out of the outer loop."""


class ScanExhausted(TaskFailure):
    """For the task: the tamper scan spent its wall-time budget on files the agent chose to change.
    Recorded as `tampered` (`scan-exhausted`); never raised out of the scan."""


class CheckFailed(TaskFailure):
    """For the task: a validation step of a generated mechanism failed (the message says which and
    why). Recorded as that step's failure, so the mechanism is refused; never raised out of the ladder."""


# -- placed here so that every error is in one module ------------------------------------------------
class TaskFormatError(UserError):
    """For the user: a task directory is malformed; the message names the file and the field. Loading a whole
    dataset records each such task as a TaskLoadError row instead of raising."""


class DataError(BenchmarkError):
    """For the user: a data dir holds no usable text (gptpretrain --dataset)."""


class InspectLoadError(BenchmarkError):
    """For the user: an inspect module, task or the inspect-ai install is unusable."""


class NotFound(UserError, KeyError):
    """For the user: a stored record (experiment, trial, trace, candidate) named in a query does
    not exist. One line, exit 2 from the CLI; 404 from the explorer. A KeyError too, for the
    lookups' callers."""

    def __str__(self) -> str:  # the message as given, not KeyError's repr of it
        return Exception.__str__(self)


class BadRequest(UserError):
    """For the user: a missing or malformed query parameter to the explorer's HTTP API (answered with 400)."""
