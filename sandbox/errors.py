"""Errors raised by sandbox backends. Each says who it is for.

- SandboxUnavailable: systemic (no daemon, no permission): the whole run stops, exit 2.
- ImageNotFound / ImageBuildError: per-task environment failures: the task's trial is recorded
  as an error row naming the image or build step; other tasks go on.
- SandboxError: anything else the backend could not do (a container died mid-trial).
"""


class SandboxError(Exception):
    """A sandbox operation failed for a reason outside the command being run."""


class SandboxUnavailable(SandboxError):
    """The backend cannot be reached at all (e.g. the Docker daemon is not running)."""


class ImageNotFound(SandboxError):
    """An image is not present locally, cannot be pulled, and the image map has no entry for it."""


class ImageBuildError(SandboxError):
    """An image build failed; the message names the failing step and ends with the log tail."""
