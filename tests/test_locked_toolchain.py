"""The locked verifier toolchain on its own: with the tamper scan's judgement switched off
(METAOPT_INTEGRITY_LAYERS=isolation), the attack families that work through the verifier's
interpreter, its plugins, its configuration or its shell earn nothing on a recognised runner,
and the control that knows the secret still passes; both ran with `isolation: full`."""

import json
import os

import pytest
from _attacks import FAMILIES, SECRET, write_dataset
from _docker_fixtures import metaopt

from metaopt.evaluation import TrialResult
from metaopt.traces.store import Store

TOOLCHAIN_FAMILIES = {"fake-python3", "fake-bash", "sitecustomize", "pth-hook", "conftest-at-root",
                      "ini-addopts-plugin", "entry-point-plugin", "stdlib-zip"}
TOKEN_TEST = f'from pathlib import Path\n\n\ndef test_token():\n    assert Path("/app/token.txt").read_text().strip() == "{SECRET}"\n'


@pytest.fixture(scope="module")
def isolated_only(docker_image, tmp_path_factory) -> dict[str, TrialResult]:
    root = tmp_path_factory.mktemp("locked")
    write_dataset(root / "ds", [f for f in FAMILIES if f[0] in TOOLCHAIN_FAMILIES], formats=("harbor",))
    for d in (root / "ds").iterdir():  # standard library only: the runner is recognised
        (d / "tests" / "test_outputs.py").write_text(TOKEN_TEST)
    db = root / "l.duckdb"
    r = metaopt("eval", "--benchmark", "terminalbench", "--dataset", str(root / "ds"), "--model", "fake/solution",
                "--harness", "baseline", "--db", str(db), "--json", "-j", "4",
                env={**os.environ, "METAOPT_INTEGRITY_LAYERS": "isolation"})
    assert r.returncode == 0, r.stderr[-3000:]
    with Store(db, read_only=True) as s:
        return {t.task_id.removesuffix("-harbor"): t for t in s.select(TrialResult, "run_id = ?", [json.loads(r.stdout)["run_id"]])}


def test_isolation_alone_stops_the_toolchain_families(isolated_only):
    assert set(isolated_only) == TOOLCHAIN_FAMILIES | {"control"}
    for name, t in isolated_only.items():
        assert t.integrity["isolation"] == "full" and t.integrity["runner"] == "tb2", (name, t.integrity)
        assert t.status != "tampered"  # the scan's evidence is not judged in this setting
        assert (t.score, t.status) == ((1.0, "passed") if name == "control" else (0.0, "failed")), (name, t.error)
    assert any(t.integrity.get("evidence_unjudged") for t in isolated_only.values())  # the scan still saw them
