"""Write a fake/script meta-model for an offline `metaopt run --strategy bilevel` demonstration: it
plays the meta-agent (proposals through write_revision) and the Level-2 model (three sessions)
in the order the loop asks, so Level 2 generates real code that the ladder checks, the loop calls
and the judgement keeps or rolls back, with no model on the machine.

    python examples/bilevel/demo_script.py > /tmp/demo.yaml
    metaopt run --benchmark terminalbench-sample --harness minimal --model fake/solution \\
        --meta-model fake/script:/tmp/demo.yaml --strategy bilevel --trials 1 --max-iterations 7 --plateau 10 \\
        --bilevel-set level2_every=2 --bilevel-set window=1 --bilevel-set judge_pairs=1

The script (what a model would have said; the mechanisms are examples/bilevel/prompt_tabu.py, a
sound one, and late_crash.py, broken on purpose):
  iterations 1-2   two prompt-only revisions (the minimal harness's failures are its limits)
  iteration 3      Level 2, round 1: writes prompt_tabu; on trial for iterations 3 and 4 (one window
                   with it, one without, in the order the seed draws)
  iterations 3-4   a limits fix (max_turns 16) in the window with it, a prompt note in the other
  iteration 5      Level 2, round 2: writes late_crash (passes the ladder, crashes live)
  iterations 5-6   a prompt note, then the second limits fix (bash timeout 30 s)
  iteration 7      Level 2, round 3: a spec that is not JSON (an error row, no default), then a note
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from metaopt.meta_agent.proposers.llm_tools import harness_yaml
from metaopt.meta_agent.search.bilevel import judge
from metaopt.meta_agent.search.mechanisms import source_hash
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import load_harness, resolve_harness


def revise(base: Harness, rationale: str, *, note: int | None = None, turns: int | None = None,
           timeout: float | None = None) -> tuple[dict, Harness]:
    d = base.model_dump(mode="json")
    if note is not None:
        d["prompts"]["system"] += f"\nNote {note}: check each step before moving on."
    if turns is not None:
        d["routing"]["limits"]["max_turns"] = turns
    if timeout is not None:
        for t in d["tools"]:
            if t["name"] == "bash":
                t["timeout_s"] = timeout
    h = Harness.model_validate(d)
    return {"tool": "write_revision", "arguments": {"harness_yaml": harness_yaml(h), "rationale": rationale,
                                                    "cause": rationale, "fixes": [], "keeps": [], "cites": []}}, h


def session(name: str, hooks: list[str], code: str, idea: str) -> list[dict]:
    spec = {"name": name, "idea": idea, "evidence": ["c1", "c2"], "hooks": {h: f"see the module's {h}" for h in hooks},
            "state": "counters of what was rejected", "expected_effect": "fewer trials on revisions that keep failing"}
    return [{"text": "Explore: the record shows prompt-only revisions c1 and c2 rejected at the screen while every "
                     "failing trial hit the turn limit or the bash timeout. Mechanisms: (1) a tabu on prompt-only "
                     "revisions, (2) a bandit over areas, (3) a parent rotation."},
            {"text": "Critique: (1) could block a useful prompt change later, but the record has none accepted and its "
                     "guidance reaches this proposer. Choose (1)."},
            {"text": "```json\n" + json.dumps(spec) + "\n```"},
            {"text": "```python\n" + code.strip() + "\n```"}]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0, help="the run's --seed (it draws the windows' order)")
    args = ap.parse_args()
    minimal = load_harness(resolve_harness("minimal"))
    good = (HERE / "prompt_tabu.py").read_text()
    bad = (HERE / "late_crash.py").read_text()
    order = judge.plan(3, 1, 1, args.seed, source_hash(good.strip() + "\n"))["order"]
    p1, _ = revise(minimal, "the agent gives up early: ask it to check each step", note=1)
    p2, _ = revise(minimal, "the agent gives up early: remind it again", note=2)
    fix, fixed = revise(minimal, "episodes hit the 8-turn limit: max_turns 16", turns=16)
    other, _ = revise(fixed if order[0] == "on" else minimal, "a further reminder", note=3)
    steps = [p1, p2, *session("prompt_tabu", ["on_result", "guidance", "filter", "state_dict", "load_state_dict"], good,
                              "say which prompt-only revisions were rejected, and drop the next ones"),
             *((fix, other) if order[0] == "on" else (other, fix)),
             *session("late_crash", ["on_result", "guidance", "state_dict", "load_state_dict"], bad,
                      "report how many results each iteration produced"),
             revise(fixed, "one more reminder", note=5)[0],
             revise(fixed, "bash timed out at 10 s on long commands: bash timeout 30 s", timeout=30)[0],
             *session("x", [], "", "")[:2], {"text": "A spec: name prompt_guard, hooks guidance."},
             {"text": "Sorry: name = prompt_guard"},
             revise(fixed, "a last reminder", note=7)[0]]
    print(yaml.safe_dump(steps, sort_keys=False, width=10_000))


if __name__ == "__main__":
    main()
