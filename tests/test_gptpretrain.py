"""gptpretrain without Docker: tokenizer, corpus and data-dir errors, the evaluator's arithmetic and
its refusal of checkpoints that read files, and the verdict rules."""

import json
import math
import os

import numpy as np
import pytest
from _docker_fixtures import metaopt

from metaopt.benchmarks.gptpretrain import bpe, corpus
from metaopt.benchmarks.gptpretrain.build import config_from_env, prepare_data
from metaopt.benchmarks.gptpretrain.verify import score
from metaopt.benchmarks.registry import BenchmarkError, load_benchmark

torch = pytest.importorskip("torch")


def test_bpe_is_a_lossless_tiktoken_encoding_with_exact_byte_counts():
    text = "def add(a, b):\n    return a + b  # sums\n" * 50 + "The quick brown fox jumps over the lazy dog. " * 40
    enc = bpe.train_encoding(text, 300)
    assert enc.n_vocab == 300 and enc.encode_single_token(bpe.BOS) == 299
    sample = "def fox(quick):\n    return 'lazy dog' + é"
    ids = enc.encode_ordinary(sample)
    assert enc.decode(ids) == sample
    assert len(ids) < len(sample.encode())  # merges were learned and are used
    nbytes = bpe.token_bytes(enc)
    assert sum(nbytes[i] for i in ids) == len(sample.encode()) and nbytes[299] == 0
    assert bpe.train_encoding(text, 300)._mergeable_ranks == enc._mergeable_ranks  # deterministic


def test_data_dir_without_text_is_a_clear_error(tmp_path):
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    with pytest.raises(BenchmarkError, match="no text found"):
        load_benchmark("gptpretrain", tmp_path)
    r = metaopt("eval", "--benchmark", "gptpretrain", "--dataset", str(tmp_path), "--agent", "nop", timeout=120)
    assert r.returncode == 2 and "no text found" in r.stderr and str(tmp_path) in r.stderr


def test_parquet_and_text_data_dirs_give_disjoint_splits(tmp_path, monkeypatch):
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    rows = [f"Document {i}: " + " ".join(f"word{j % 97}" for j in range(i, i + 400)) for i in range(300)]
    pq.write_table(pa.table({"text": rows, "id": list(range(300))}), tmp_path / "shard0.parquet")
    (tmp_path / "notes.txt").write_text("plain text file\n" * 2000)
    docs = corpus.documents(tmp_path, 10**9)
    assert any(n.startswith("notes.txt#") for n, _ in docs) and any(n.startswith("shard0.parquet#") for n, _ in docs)
    splits = {corpus.split_of(n) for n, _ in docs}
    assert splits == {"train", "dev", "val"}
    monkeypatch.setenv("METAOPT_CACHE_DIR", str(tmp_path / "cache"))
    cfg = config_from_env({"METAOPT_PRETRAIN_MODE": "smoke"})
    out = prepare_data(cfg, tmp_path)
    val = np.fromfile(out / "val.bin", dtype=np.uint16)
    train = np.fromfile(out / "train.bin", dtype=np.uint16)
    assert len(val) > 1000 and len(train) > 10 * len(val)
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(corpus.DataError, match="bad.parquet"):
        corpus.documents(tmp_path, 10**9)


@pytest.fixture
def prepare_mod(tmp_path, monkeypatch):
    """The in-sandbox prepare.py, imported on the host with a tiny data/ folder."""
    import importlib.util

    from metaopt.benchmarks.gptpretrain.build import FILES

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.json").write_text(json.dumps(
        {"mode": "smoke", "vocab_size": 16, "bos_id": 15, "seq_len": 8, "eval_batch": 2, "time_budget_s": 1, "grace_s": 1}))
    (tmp_path / "prepare.py").write_text((FILES / "prepare.py").read_text())
    spec = importlib.util.spec_from_file_location("prepare_under_test", tmp_path / "prepare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    yield mod
    torch.set_num_threads(os.cpu_count() or 1)


class Uniform(torch.nn.Module):
    def forward(self, idx):
        return torch.zeros(idx.shape[0], idx.shape[1], 16) + idx.unsqueeze(-1).float() * 0


def test_evaluator_bits_per_byte_of_a_uniform_model(prepare_mod, tmp_path):
    path = prepare_mod.save_checkpoint(torch.nn.Sequential(torch.nn.Embedding(16, 4), torch.nn.Linear(4, 16)),
                                       str(tmp_path / "out" / "m.pt"))
    model = prepare_mod.load_checkpoint(path)
    assert model(torch.zeros(2, 8, dtype=torch.long)).shape == (2, 8, 16)
    data = np.arange(40, dtype=np.uint16) % 16  # 2 whole batches of 2x8 windows = 32 targets
    nbytes = np.full(16, 3)
    nbytes[15] = 0  # <|bos|>: no text, left out of both sums
    r = prepare_mod.evaluate_bpb(Uniform(), data, nbytes)
    counted = sum(1 for t in data[1:33] if t != 15)
    assert r["tokens"] == counted and r["bytes"] == 3 * counted
    assert r["bpb"] == pytest.approx(math.log2(16) / 3, rel=1e-6)


def test_checkpoint_that_reads_a_file_is_refused(prepare_mod, tmp_path):
    secret = tmp_path / "val.bin"
    np.arange(64, dtype=np.float32).tofile(secret)

    class Peek(torch.nn.Module):
        def forward(self, idx):
            leak = torch.from_file(str(secret), size=16)
            return torch.zeros(idx.shape[0], idx.shape[1], 16) + leak

    path = str(tmp_path / "peek.pt")
    torch.jit.trace(Peek(), torch.zeros(2, 8, dtype=torch.long), check_trace=False).save(path)
    with pytest.raises(ValueError, match="aten::from_file"):
        prepare_mod.load_checkpoint(path)


def test_verdicts():
    base = {"val_bpb": 2.0}
    ok = score({"status": "ok", "val_bpb": 1.9, "tokens_per_second": 1000.0}, base, 0.01)
    assert (ok.status, round(ok.score, 6), ok.rewards["val_bpb"], ok.rewards["tokens_per_second"]) == ("passed", 0.05, 1.9, 1000.0)
    same = score({"status": "ok", "val_bpb": 1.99}, base, 0.01)
    assert same.status == "failed" and same.failure_mode == "no_improvement" and 0 < same.score < 0.01
    worse = score({"status": "ok", "val_bpb": 2.5}, base, 0.01)
    assert worse.score == 0.0 and worse.status == "failed"
    crash = score({"status": "failed", "failure_mode": "overrun", "reason": "killed", "log_tail": "step 9"}, base, 0.01)
    assert crash.score == 0.0 and crash.failure_mode == "overrun" and "step 9" in crash.error
