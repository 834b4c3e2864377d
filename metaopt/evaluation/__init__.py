"""The evaluation layer: run one trial, score it, run a whole eval. Between benchmarks (what a
task is, how it is scored) and the optimizer (which harness to try next).

    from metaopt.evaluation import HarnessAgent, run_eval
    result = run_eval(tasks, HarnessAgent(harness, "fake/solution"), benchmark=..., backend=..., store=...)
    result.rows  # [TrialResult, ...], also in the store's `trials` table

`metaopt eval`, examples/hello_world.py and the optimizer all call `run_eval`.
"""

from metaopt.evaluation.agents import AGENTS, Agent, AgentResult, HarnessAgent, NopAgent, OracleAgent
from metaopt.evaluation.result import TrialResult
from metaopt.evaluation.runner import EvalResult, Executor, LocalExecutor, TrialJob, new_run_id, run_eval
from metaopt.evaluation.trial import ImageCache, run_trial
from metaopt.evaluation.verify import stop_agent_processes, verify

__all__ = ["AGENTS", "Agent", "AgentResult", "EvalResult", "Executor", "HarnessAgent", "ImageCache",
           "LocalExecutor", "NopAgent", "OracleAgent", "TrialJob", "TrialResult", "new_run_id", "run_eval",
           "run_trial", "stop_agent_processes", "verify"]
