"""EvalConfig: what `metaopt eval` runs, validated in one place (one-line errors naming the flag),
and the objects it builds: the task list and the agent."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from metaopt.benchmarks.registry import load_benchmark, with_gpus
from metaopt.benchmarks.task import Task, TaskLoadError
from metaopt.core.errors import UserError
from metaopt.evaluation.agents import AGENTS, Agent, HarnessAgent


class EvalConfig(BaseModel):
    """One evaluation run's settings. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    benchmark: str
    """Benchmark name (`metaopt benchmarks list`)."""
    dataset: Path | None = None
    """Task directory or dataset for benchmarks that need one."""
    tasks: list[str] | None = None
    """Only these task ids; None: every task."""
    agent: str | None = None
    """A reference agent: oracle (the task's own solution) or nop (does nothing)."""
    model: str | None = None
    """Run the harness agent with this model (provider/model) instead of a reference agent."""
    harness: str | None = None
    """Harness folder or shipped name (baseline, minimal, spreadsheet); default baseline."""
    base_url: str | None = None
    """Server for openai-compatible/ models (else OPENAI_BASE_URL)."""
    trials: int = Field(default=1, ge=1)
    """Attempts per task."""
    concurrency: int = Field(default=2, ge=1)
    """Trials running at once."""
    timeout_multiplier: float = Field(default=1.0, gt=0)
    """Scales agent and verifier timeouts (scores are comparable only at 1.0)."""
    gpus: int | None = Field(default=None, ge=0)
    """GPUs per task container; None: what each task asks."""
    executor: str = "local"
    """Where trials run: local (a thread pool here) or ray (Ray tasks on a cluster's nodes)."""
    ray_address: str | None = None
    """The Ray cluster for executor ray (the head's host:port); None: RAY_ADDRESS, else a new local Ray."""

    @model_validator(mode="after")
    def _one_agent(self) -> EvalConfig:
        if self.model is None and self.harness is not None:
            raise UserError("--harness needs --model (the model that runs the harness)")
        if self.model is not None and self.agent is not None:
            raise UserError("give either --agent (oracle, nop) or --model, not both")
        return self

    def load_tasks(self) -> list[Task | TaskLoadError]:
        return with_gpus(load_benchmark(self.benchmark, self.dataset, self.tasks), self.gpus)

    def build_agent(self) -> Agent:
        """The reference agent (--agent, default oracle) or the harness agent (--model), checked
        now: an unknown agent, a bad harness or a model whose client cannot be built is a UserError."""
        from metaopt.task_agent.harness_io import load_harness, resolve_harness
        from metaopt.task_agent.models import get_model

        if self.model is None:
            return AGENTS.load(self.agent or "oracle")()
        model = self.model
        harness = _about("--harness", lambda: load_harness(resolve_harness(self.harness or "baseline")))
        from metaopt.task_agent.models.fake import needs_task

        # fake/solution and fake/flaky:P are built per trial from the task; everything else is checked now
        _about("--model", lambda: needs_task(model) or get_model(model, base_url=self.base_url))
        return HarnessAgent(harness, model, base_url=self.base_url)


def _about(option: str, fn):
    """fn(), with `option` named on any UserError it raises."""
    try:
        return fn()
    except UserError as e:
        e.field = e.field or option
        raise
