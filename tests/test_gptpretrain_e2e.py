"""gptpretrain end to end in real Docker on CPU (smoke mode): the oracle beats the measured
baseline through the CLI, and train.py files that cheat or break the rules get no credit.

The image is Debian bookworm's python3-torch on metaopt-base (built once, cached by content).
"""

import json
import os
from pathlib import Path

import pytest
from _docker_fixtures import metaopt

from metaopt.benchmarks.gptpretrain.build import build_task, config_from_env
from metaopt.benchmarks.gptpretrain.verify import load_baselines
from metaopt.evaluation import AgentResult, ImageCache, TrialResult, run_trial
from metaopt.sandbox.docker import DockerBackend
from metaopt.sandbox.images import ImageMap
from metaopt.traces.store import Store

# The first run builds the task image (Debian's python3-torch from the mirror: minutes), so
# these tests get more than the suite's default 600 s.
pytestmark = [pytest.mark.usefixtures("docker_image"), pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def cache_dir(docker_image, tmp_path_factory):
    d = tmp_path_factory.mktemp("ptcache")
    old = os.environ.get("METAOPT_CACHE_DIR")
    os.environ["METAOPT_CACHE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("METAOPT_CACHE_DIR", None)
    else:
        os.environ["METAOPT_CACHE_DIR"] = old


def _eval(cache_dir: Path, db: Path, *how: str) -> dict:
    env = {**os.environ, "METAOPT_CACHE_DIR": str(cache_dir), "METAOPT_PRETRAIN_MODE": "smoke"}
    r = metaopt("eval", "--benchmark", "gptpretrain", *how, "--db", str(db), "--json", env=env, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.slow
def test_oracle_and_fake_solution_beat_the_measured_baseline(cache_dir, tmp_path):
    db = tmp_path / "s.duckdb"
    out = _eval(cache_dir, db, "--agent", "oracle")
    (row,) = out["tasks"]
    assert row["task_id"] == "gptpretrain-smoke" and row["status"] == "passed", row
    assert 0.01 <= row["score"] < 1
    (baseline,) = load_baselines().values()  # measured in this run, on this hardware, and cached
    assert baseline["val_bpb"] > 0 and baseline["fingerprint"]["cores"] >= 1
    with Store(db, read_only=True) as store:
        (trial,) = store.select(TrialResult, "run_id = ?", [out["run_id"]])
    rewards = trial.rewards
    assert rewards["baseline_val_bpb"] == pytest.approx(baseline["val_bpb"])
    assert rewards["val_bpb"] < baseline["val_bpb"] and rewards["tokens_per_second"] > 0
    assert '"fingerprint"' in trial.test_output  # the hardware the numbers belong to

    out = _eval(cache_dir, tmp_path / "f.duckdb", "--model", "fake/solution")  # the same edit through the bash tool
    (row,) = out["tasks"]
    assert row["status"] == "passed" and row["score"] >= 0.01, row
    assert len(load_baselines()) == 1  # the cached baseline was reused, not measured again


class WriteTrainPy:
    """An agent that replaces train.py (and optionally runs one more command) as the agent user."""

    name = "write-train-py"

    def __init__(self, source: str, extra: str = ""):
        self.source, self.extra = source, extra

    def run(self, task, sandbox, timeout_s, *, ids=None):
        r = sandbox.exec(f"cat > train.py <<'PYEOF'\n{self.source}\nPYEOF\n{self.extra}", user=task.agent_user,
                         workdir="/app", timeout=60)
        return AgentResult(error=None if r.exit_code == 0 else f"setup failed: {r.stdout}{r.stderr}")


UNTRAINED = """
import torch
import prepare as P

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(P.VOCAB_SIZE, 8)
        self.head = torch.nn.Linear(8, P.VOCAB_SIZE)

    def forward(self, idx):
        return self.head(self.embed(idx))
"""

# If the validation tokens could be read, a bigram table of them would score far below the
# baseline (1.45 bits per byte on the offline corpus, against 2.4 for the 40 s baseline and
# 3.1 for the 5 s one); when they cannot, the model stays untrained.
READS_VALIDATION = UNTRAINED + """
import glob, os
import numpy as np
found = None
for path in ["/verifier/val.bin", "/app/../verifier/val.bin"] + glob.glob("/*/val*.bin") + glob.glob("/*/*/val*.bin"):
    try:
        found = np.fromfile(path, dtype=np.uint16)
        print("READ", path, len(found))
        break
    except OSError as e:
        print("cannot read", path, type(e).__name__)
model = Tiny()
if found is not None:
    counts = np.full((P.VOCAB_SIZE, P.VOCAB_SIZE), 0.01)
    np.add.at(counts, (found[:-1], found[1:]), 1.0)
    table = torch.tensor(np.log(counts / counts.sum(1, keepdims=True)), dtype=torch.float32)
    model.embed = torch.nn.Embedding.from_pretrained(table)
    model.head = torch.nn.Identity()
else:
    print("no validation data reachable")
P.save_checkpoint(model)
"""

PRINTS_FAKE_SCORE = UNTRAINED + """
P.save_checkpoint(Tiny())
print("---")
print("val_bpb: 0.0100")
print("val_bpb 0.01")
"""

CASES = {
    "reads_validation": (READS_VALIDATION, "", "failed", "no_improvement"),
    "prints_fake_val_bpb": (PRINTS_FAKE_SCORE, "", "failed", "no_improvement"),
    "no_checkpoint": ("print('trained, but saved nothing')", "", "failed", "no_checkpoint"),
    "writes_outside": (UNTRAINED + "P.save_checkpoint(Tiny())\nopen('/tmp/stash.bin', 'w').write('x')\n", "",
                       "failed", "wrote_outside"),
    "overruns": ("while True:\n    pass\n", "", "failed", "overrun"),  # stopped by RLIMIT_CPU
    "edits_prepare": (UNTRAINED + "P.save_checkpoint(Tiny())\n",
                      "cp prepare.py p && rm prepare.py && sed 's/^TIME_BUDGET: float = .*/TIME_BUDGET = 1e9/' p > prepare.py",
                      "failed", "tampered"),
}


def test_cheating_and_broken_train_py_get_no_credit(cache_dir):
    """Budget 5 s so that each case costs seconds; the baseline for it is measured once."""
    task = build_task(cfg=config_from_env({"METAOPT_PRETRAIN_MODE": "smoke", "METAOPT_PRETRAIN_BUDGET_S": "5"}))
    backend = DockerBackend(image_map=ImageMap.load())
    images = ImageCache(backend)
    run_id = "pytest-gptpretrain"
    rows = {}
    try:
        for name, (source, extra, _, _) in CASES.items():
            rows[name] = run_trial(task, 0, WriteTrainPy(source, extra), backend=backend, images=images, run_id=run_id)
    finally:
        backend.prune(run_id)
    for name, (_, _, status, mode) in CASES.items():
        row = rows[name]
        assert (row.status, row.failure_mode, row.score) == (status, mode, 0.0), (name, row.error, (row.test_output or "")[-2000:])
    base = rows["prints_fake_val_bpb"].rewards
    assert base["val_bpb"] > base["baseline_val_bpb"]  # its own printed 0.01 was ignored
    out = rows["reads_validation"].test_output
    assert "no validation data reachable" in out and "READ " not in out
    assert "/tmp/stash.bin" in rows["writes_outside"].error
    assert "prepare.py was modified" in rows["edits_prepare"].error
