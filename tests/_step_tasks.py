"""Generated TB1 tasks for optimizer tests: write N numbered lines, one solution step per line.

`harnesses/minimal` (8 turns) fails the 12-step ones on its turn limit under `fake/solution`;
doubling max_turns fixes them, so a proposer that reads the traces has something real to find.
"""

from __future__ import annotations

from pathlib import Path


def make_tasks(root: Path, n_long: int = 9, n_short: int = 3, prefix: str = "steps") -> Path:
    for i in range(n_long + n_short):
        steps = 12 if i < n_long else 1
        d = root / f"{prefix}-{i:02d}"
        (d / "tests").mkdir(parents=True)
        (d / "task.yaml").write_text(f"instruction: Write the numbers 1 to {steps} to /app/out.txt, one per line.\n"
                                     "difficulty: easy\nmax_agent_timeout_sec: 120\nmax_test_timeout_sec: 60\n")
        (d / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
        (d / "run-tests.sh").write_text("cd /app && python3 -m pytest $TEST_DIR/test_outputs.py -rA\n")
        (d / "tests" / "test_outputs.py").write_text(
            "from pathlib import Path\n\n\ndef test_lines():\n"
            f"    assert Path('/app/out.txt').read_text().split() == [str(i) for i in range(1, {steps + 1})]\n")
        (d / "solution.yaml").write_text("".join(f"- command: echo {k} >> /app/out.txt\n" for k in range(1, steps + 1)))
    return root
