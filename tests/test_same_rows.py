"""Same-seed runs write the rows recorded in tests/data/rows/ (tests/_row_dump.py, recorded at
8fe70b3, before the sequential loop became the one loop's single slot): a Pareto run and a bilevel
run on LocalSandbox, and the README's offline job in Docker (12 minutes: opt in with
METAOPT_README_ROWS=1). A change that moves a
decision, a trial or a spend row shows here row by row; one meant to, records the files again:

    python3 tests/_row_dump.py pareto bilevel readme --out tests/data/rows
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _row_dump import LOCAL, backend_for, differences, dump

ROWS = Path(__file__).parent / "data" / "rows"


def _same(name: str, backend, tmp_path: Path) -> None:
    recorded = json.loads((ROWS / f"{name}.json").read_text())
    found = differences(recorded, dump(name, backend, tmp_path))
    assert not found, f"{len(found)} rows differ from tests/data/rows/{name}.json:\n" + "\n".join(
        line[:400] for line in found[:20])


@pytest.mark.parametrize("name", LOCAL)
def test_a_seeded_run_on_local_sandboxes_writes_the_recorded_rows(name, tmp_path, local_backend):
    _same(name, local_backend, tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("METAOPT_README_ROWS"), reason="12 minutes; opt in with METAOPT_README_ROWS=1 "
                    "(or python3 tests/_row_dump.py readme --compare)")
def test_the_readme_job_writes_the_recorded_rows(tmp_path, docker_backend):
    """Opt-in: the README job's own run (tests/test_optimizer_e2e.py) already takes 12 minutes of the
    suite; this one repeats it with a fixed experiment id (canaries depend on the id). Compared at the
    one-loop refactor: 0 differing rows of 183 trials, 5 gate rows, 185 spend rows."""
    _same("readme", backend_for("readme"), tmp_path)
