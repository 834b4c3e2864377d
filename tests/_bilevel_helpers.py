"""Scripts for the bilevel tests: a fake meta-model (fake/script) that writes proposals and holds
Level-2 sessions in one conversation stream, generated mechanism sources good and bad, and a
recorded ledger to feed the ladder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from metaopt.meta_agent.proposers.llm_tools import harness_yaml
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import load_harness, resolve_harness

if TYPE_CHECKING:
    from metaopt.meta_agent.search.bilevel.snapshot import Snapshot

MINIMAL = load_harness(resolve_harness("minimal"))

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bilevel"
# A generated mechanism that is fine: prompt-only revisions were rejected again and again, so it
# says so and drops the next prompt-only ones; every function it defines runs through the hooks.
PROMPT_TABU = (EXAMPLES / "prompt_tabu.py").read_text()
# Passes the ladder (no recorded candidate reaches iteration 5), then fails live: a list sized
# for five iterations, an IndexError in on_result at iteration 5, and it is switched off.
BREAKS_LATER = (EXAMPLES / "late_crash.py").read_text()


def spec(name: str, hooks: list[str], **extra) -> dict:
    return {"name": name, "idea": f"{name}: steer the search away from what keeps failing",
            "evidence": ["c1", "c2"], "hooks": {h: f"what {h} does" for h in hooks},
            "state": "counters", "expected_effect": "fewer trials spent on revisions that get rejected", **extra}


def level2_steps(spec_obj: dict | str, code: str | None) -> list[dict]:
    """The four turns of one Level-2 session, as fake/script steps."""
    steps = [{"text": "Explore: prompt-only revisions c1 and c2 were rejected at the screen; a tabu on them "
                      "would save their trials."},
             {"text": "Critique: it could block a useful prompt change; the record shows none accepted. Choose it."},
             {"text": spec_obj if isinstance(spec_obj, str) else "```json\n" + json.dumps(spec_obj) + "\n```"}]
    if code is not None:
        steps.append({"text": "```python\n" + code.strip() + "\n```"})
    return steps


def with_turns(turns: int, base: Harness = MINIMAL) -> Harness:
    data = base.model_dump(mode="json")
    data["routing"]["limits"]["max_turns"] = turns
    return Harness.model_validate(data)


def prompt_revision(n: int, base: Harness = MINIMAL) -> dict:
    """A proposal step: `base` with a neutral sentence n appended to its system prompt (fails the screen)."""
    data = base.model_dump(mode="json")
    data["prompts"]["system"] += f"\nNote {n}: be careful."
    return _write(Harness.model_validate(data), f"prompt note {n}")


def turns_revision(turns: int, base: Harness = MINIMAL) -> dict:
    """A proposal step: `base` with max_turns raised to `turns`."""
    return _write(with_turns(turns, base), f"episodes hit the turn limit: max_turns -> {turns}")


def _write(h: Harness, rationale: str) -> dict:
    return {"tool": "write_revision", "arguments": {"harness_yaml": harness_yaml(h), "rationale": rationale,
                                                    "cause": rationale, "fixes": [], "keeps": [], "cites": []}}


def write_script(path: Path, steps: list[dict]) -> str:
    path.write_text(yaml.safe_dump(steps, sort_keys=False))
    return f"fake/script:{path}"


def stair_tasks(root: Path, steps: tuple[int, ...] = (12,) * 6 + (24,) * 3 + (1,) * 3) -> list:
    """LocalSandbox tasks writing 1..n to /app/out.txt: under fake/solution, 8 turns (minimal) fail
    the 12- and 24-step ones, 16 fail the 24-step ones, 32 pass everything."""
    from _local_tasks import CHECK

    from metaopt.benchmarks.task import Environment, Solution, Task, Verifier

    tasks = []
    for i, n in enumerate(steps):
        d = root / f"stair-{i:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "check.sh").write_text(CHECK.format(n=n))
        tasks.append(Task(
            id=f"stair-{i:02d}", benchmark="local-stairs", format="local", source_dir=d,
            instruction=f"Write the numbers 1 to {n} to /app/out.txt, one per line.",
            environment=Environment(image="host"), workdir="/app", agent_timeout_s=60,
            verifier=Verifier(files=[(d / "check.sh", "/tests/check.sh")], command="bash /tests/check.sh", timeout_s=30),
            scoring="reward", solution=Solution(steps=[f"echo {k} >> /app/out.txt" for k in range(1, n + 1)])))
    return tasks


def recorded() -> Snapshot:
    """A recorded ledger as the protocol sees it: a baseline, two rejected prompt-only revisions, an
    accepted limits raise, a revision the guard refused."""
    from metaopt.meta_agent.search.bilevel.snapshot import Snapshot

    def cand(i, parent, status, areas, kinds, val=None, delta=None, trials=4):
        return {"id": f"e/c{i}", "parent_id": parent, "iteration": i, "status": status, "reason": f"{status} ...",
                "proposer": "llm" if parent else None, "areas": areas, "kinds": kinds, "rationale": f"change {i}",
                "val_mean": val, "val_delta": delta, "trials": trials, "children": 0}

    history = [cand(0, None, "baseline", [], [], 0.25, None, 8),
               cand(1, "e/c0", "rejected", ["prompts"], ["prompts.system"]),
               cand(2, "e/c0", "rejected", ["prompts"], ["prompts.system"]),
               cand(3, "e/c0", "accepted", ["limits"], ["routing.limits.max_turns"], 1.0, 0.75, 9),
               cand(4, "e/c3", "invalid", ["tools"], ["tools.grep"], trials=0)]
    decisions = {"e/c1": {"stage": "screen", "outcome": "fail", "reason": "no better", "delta": 0.0, "se": None},
                 "e/c2": {"stage": "screen", "outcome": "fail", "reason": "no better", "delta": 0.0, "se": None},
                 "e/c3": {"stage": "validation", "outcome": "accept", "reason": "gain", "delta": 0.75, "se": 0.25},
                 "e/c4": {"stage": "guard", "outcome": "fail", "reason": "names a task id", "delta": None, "se": None}}
    revisions = {c["id"]: {"parent_id": c["parent_id"], "rationale": c["rationale"], "areas": c["areas"],
                           "kinds": c["kinds"], "diff": "--- parent\n+++ child\n"} for c in history[1:]}
    return Snapshot(history, decisions, revisions, sum(c["trials"] for c in history))
