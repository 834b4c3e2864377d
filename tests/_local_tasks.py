"""Tasks that run on LocalSandbox (image `host`): write N numbered lines to /app/out.txt, one
solution step per line, scored by a shell verifier writing /logs/verifier/reward.txt.

`harnesses/minimal` (8 turns) fails the 12-step ones on its turn limit under `fake/solution`;
doubling max_turns fixes them, so a proposer that reads the traces has something real to find.
"""

from __future__ import annotations

from pathlib import Path

from metaopt.benchmarks.task import Environment, Solution, Task, Verifier

CHECK = """expected=$(seq 1 {n})
if [ "$(cat /app/out.txt 2>/dev/null)" = "$expected" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def step_tasks(root: Path, n_long: int = 6, n_short: int = 3, benchmark: str = "local-steps", long: int = 12) -> list[Task]:
    tasks = []
    for i in range(n_long + n_short):
        steps = long if i < n_long else 1
        d = root / f"steps-{i:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "check.sh").write_text(CHECK.format(n=steps))
        tasks.append(Task(
            id=f"steps-{i:02d}", benchmark=benchmark, format="local", source_dir=d,
            instruction=f"Write the numbers 1 to {steps} to /app/out.txt, one per line.",
            environment=Environment(image="host"), workdir="/app", agent_timeout_s=60,
            verifier=Verifier(files=[(d / "check.sh", "/tests/check.sh")], command="bash /tests/check.sh",
                              timeout_s=30),
            scoring="reward", solution=Solution(steps=[f"echo {k} >> /app/out.txt" for k in range(1, steps + 1)])))
    return tasks
