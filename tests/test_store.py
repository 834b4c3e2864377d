"""The DuckDB store: named migrations, trial rows, bad files."""

import duckdb
import pytest

from metaopt.evaluation import TrialResult
from metaopt.traces.migrations import MIGRATIONS
from metaopt.traces.store import Store, StoreError


def test_migrations_are_recorded_once(tmp_path):
    db = tmp_path / "m.duckdb"
    Store(db).close()
    with Store(db) as s:
        names = [r["name"] for r in s.rows("SELECT name FROM schema_migrations")]
    assert names == [name for name, _ in MIGRATIONS]


def test_trial_round_trip(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        s.begin_run("r1", benchmark="b", agent="oracle", dataset=None, args={"trials": 1})
        s.insert(TrialResult(trial_id="r1/t/0", run_id="r1", benchmark="b", task_id="t", attempt=0,
                             agent="oracle", score=1.0, status="passed", tests={"t::a": "passed"}))
        s.end_run("r1", "finished")
    with Store(tmp_path / "s.duckdb", read_only=True) as s:
        [row] = s.select(TrialResult, "run_id = ?", ["r1"])
        assert (row.score, row.status, row.error) == (1.0, "passed", None)
        assert row.tests == {"t::a": "passed"}
        assert '"t::a"' in s.rows("SELECT tests FROM trials")[0]["tests"]  # a JSON column
        assert s.rows("SELECT status FROM runs")[0]["status"] == "finished"


def test_newer_schema_is_refused(tmp_path):
    db = tmp_path / "n.duckdb"
    Store(db).close()
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_migrations VALUES ('9999_from_the_future', now())")
    con.close()
    with pytest.raises(StoreError, match="newer metaopt .*9999_from_the_future"):
        Store(db)


def test_corrupt_and_foreign_files(tmp_path):
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError, match="cannot open store"):
        Store(bad)
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    with pytest.raises(StoreError, match="not a metaopt store"):
        Store(other, read_only=True)
    with pytest.raises(StoreError, match="does not exist"):
        Store(tmp_path / "missing.duckdb", read_only=True)
