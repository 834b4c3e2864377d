"""Build the gptpretrain Task: corpus -> BPE tokenizer -> token files -> image context + verifier.

Everything lands in a cache folder keyed by the corpus, the tokenizer size and the mode, so a
second `load_tasks` only rewrites a few small files. Settings come from the environment because
`metaopt eval` has no benchmark-specific options:

    METAOPT_PRETRAIN_MODE     smoke (CPU, small model, float32, no compile) | gpu.
                              Default: gpu when `nvidia-smi -L` lists a GPU, else smoke.
    METAOPT_PRETRAIN_BUDGET_S training seconds per run (default 40 smoke, 300 gpu)
    METAOPT_PRETRAIN_IMAGE    gpu mode: a local image with CUDA PyTorch 2.x and numpy
                              (default pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime; map or
                              build it yourself, nothing is pulled)
    METAOPT_PRETRAIN_GPUS     gpus passed to the container in gpu mode (default 1)
    METAOPT_CACHE_DIR         cache root (default $XDG_CACHE_HOME/metaopt or ~/.cache/metaopt)

The validation split is written only into the verifier folder (mode 0600): it is copied into
the container after the agent stops, never into the image.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from metaopt.benchmarks.gptpretrain import bpe, corpus
from metaopt.benchmarks.task import Environment, Resources, Solution, Task, Verifier
from metaopt.core.errors import UserError

FILES = Path(__file__).parent / "files"
BENCHMARK = "gptpretrain"
CACHE_VERSION = "1"
DEFAULT_GPU_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
AGENT_UID, TRAINER_UID = 1000, 1001
# The oracle's known-good change: the baseline's peak learning rate is conservative.
ORACLE_SED = r"s/^LR = 1e-3 /LR = 4e-3 /"


@dataclass(frozen=True)
class Config:
    """One mode's sizes. `min_improvement`: relative val_bpb gain that counts as beating the
    baseline (above the run-to-run noise of a time-budgeted run)."""

    mode: str
    vocab_size: int
    seq_len: int
    eval_batch: int
    time_budget_s: float
    grace_s: float
    max_corpus_bytes: int
    bpe_bytes: int
    val_tokens: int
    dev_tokens: int
    cpus: float | None
    memory_mb: int | None
    gpus: int
    agent_timeout_s: float
    min_improvement: float
    image: str | None


def config_from_env(env: dict[str, str] | None = None) -> Config:
    env = dict(os.environ if env is None else env)
    mode = env.get("METAOPT_PRETRAIN_MODE") or ("gpu" if _host_has_gpu() else "smoke")
    if mode not in ("smoke", "gpu"):
        raise UserError(f"METAOPT_PRETRAIN_MODE: unknown mode {mode!r} (known: smoke, gpu)")
    try:
        budget = float(env.get("METAOPT_PRETRAIN_BUDGET_S") or (40 if mode == "smoke" else 300))
        gpus = int(env.get("METAOPT_PRETRAIN_GPUS") or 1)
    except ValueError as e:
        raise UserError(f"METAOPT_PRETRAIN_BUDGET_S / METAOPT_PRETRAIN_GPUS: {e}") from None
    if budget <= 0:
        raise UserError("METAOPT_PRETRAIN_BUDGET_S must be positive")
    if mode == "smoke":
        return Config("smoke", 1024, 64, 16, budget, 10 + budget / 2, 8_000_000, 1_000_000, 32_768, 16_384,
                      2.0, 4096, 0, 900, 0.01, None)
    return Config("gpu", 8192, 1024, 32, budget, 180, 400_000_000, 4_000_000, 1 << 21, 1 << 20,
                  None, None, gpus, 4 * 3600, 0.005, env.get("METAOPT_PRETRAIN_IMAGE") or DEFAULT_GPU_IMAGE)


def _host_has_gpu() -> bool:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, check=False, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def cache_root() -> Path:
    if os.environ.get("METAOPT_CACHE_DIR"):
        return Path(os.environ["METAOPT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "metaopt"


def prepare_data(cfg: Config, data_dir: Path | None) -> Path:
    """Tokenized splits for this corpus and mode, built once. Raises corpus.DataError."""
    docs = corpus.documents(data_dir, cfg.max_corpus_bytes)
    h = hashlib.sha256(f"{CACHE_VERSION}|{cfg.vocab_size}|{cfg.bpe_bytes}|{cfg.val_tokens}|{cfg.dev_tokens}".encode())
    for name, text in docs:
        h.update(name.encode() + b"\0" + text.encode("utf-8", "replace") + b"\0")
    out = cache_root() / BENCHMARK / "data" / h.hexdigest()[:16]
    if (out / "done").exists():
        return out
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    by_split: dict[str, list[str]] = {"train": [], "dev": [], "val": []}
    for name, text in docs:
        by_split[corpus.split_of(name)].append(text)
    if not by_split["train"] or not by_split["val"] or not by_split["dev"]:
        raise corpus.DataError(f"--dataset {data_dir}: too little text to split into train, dev and validation")
    sample, size = [], 0
    for text in by_split["train"]:
        if size >= cfg.bpe_bytes:
            break
        sample.append(text)
        size += len(text)
    enc = bpe.train_encoding("".join(sample), cfg.vocab_size)
    bos = enc.encode_single_token(bpe.BOS)
    caps = {"train": None, "dev": cfg.dev_tokens, "val": cfg.val_tokens}
    for split, texts in by_split.items():
        ids: list[int] = []
        for doc in enc.encode_ordinary_batch(texts):
            ids.append(bos)
            ids.extend(doc)
            if caps[split] and len(ids) > caps[split]:
                break
        arr = np.asarray(ids[: caps[split] + 1] if caps[split] else ids, dtype=np.uint16)
        arr.tofile(tmp / f"{split}.bin")
    np.save(tmp / "token_bytes.npy", np.asarray(bpe.token_bytes(enc), dtype=np.int64))
    (tmp / "vocab.json").write_text(json.dumps([enc.decode_single_token_bytes(i).hex() for i in range(enc.n_vocab)]))
    (tmp / "tokenizer.json").write_text(json.dumps({"pat_str": enc._pat_str, "special_tokens": enc._special_tokens}))
    (tmp / "info.json").write_text(json.dumps({"n_vocab": enc.n_vocab, "bos_id": bos}))
    (tmp / "done").write_text("ok")
    if out.exists():
        shutil.rmtree(tmp)
    else:
        tmp.rename(out)
    return out


def build_task(data_dir: Path | None = None, cfg: Config | None = None) -> Task:
    """The one gptpretrain Task for this machine's mode. Raises corpus.DataError, ValueError."""
    cfg = cfg or config_from_env()
    data = prepare_data(cfg, data_dir)
    info = json.loads((data / "info.json").read_text())
    meta = {"mode": cfg.mode, "vocab_size": info["n_vocab"], "bos_id": info["bos_id"],
            "seq_len": cfg.seq_len, "eval_batch": cfg.eval_batch, "time_budget_s": cfg.time_budget_s,
            "grace_s": cfg.grace_s}
    key = hashlib.sha256(json.dumps([data.name, meta, _files_digest()], sort_keys=True).encode()).hexdigest()[:16]
    root = cache_root() / BENCHMARK / "tasks" / f"{cfg.mode}-{key}"
    env_dir, ver_dir = root / "environment", root / "verifier"
    app = env_dir / "app"
    (app / "data").mkdir(parents=True, exist_ok=True)
    for name in ("train.bin", "dev.bin", "token_bytes.npy", "vocab.json"):
        _link_or_copy(data / name, app / "data" / name)
    (app / "data" / "meta.json").write_text(json.dumps(meta, indent=1))
    shutil.copy(FILES / "prepare.py", app / "prepare.py")
    shutil.copy(FILES / "train.py", app / "train.py")
    (env_dir / "Dockerfile").write_text(dockerfile(cfg))
    _verifier_dir(ver_dir, app, data)
    expected = {rel: _sha256(app / rel) for rel in ("prepare.py", "data/meta.json", "data/train.bin",
                                                      "data/dev.bin", "data/token_bytes.npy", "data/vocab.json")}
    _private_write(ver_dir / "expected.json", json.dumps(expected, indent=1))
    instruction = (FILES / "instruction.md").read_text().format(
        budget=f"{cfg.time_budget_s:g}", mode=cfg.mode, grace=f"{cfg.grace_s:g}")
    return Task(
        id=f"gptpretrain-{cfg.mode}",
        benchmark=BENCHMARK,
        format="gptpretrain",
        source_dir=root,
        instruction=instruction,
        environment=Environment(context_dir=env_dir),
        workdir="/app",
        agent_user="agent",
        agent_timeout_s=cfg.agent_timeout_s,
        verifier=Verifier(files=[(ver_dir, "/verifier")], command="python3 /verifier/score.py run",
                          timeout_s=2 * (4 if cfg.mode == "smoke" else 1) * (cfg.time_budget_s + cfg.grace_s) + 300),
        scoring="val_bpb",
        solution=Solution(command=f"sed -i '{ORACLE_SED}' train.py && grep -n '^LR = ' train.py"),
        resources=Resources(cpus=cfg.cpus, memory_mb=cfg.memory_mb, gpus=cfg.gpus),
        tags=["pretraining", cfg.mode],
        metadata={"mode": cfg.mode, "time_budget_s": cfg.time_budget_s, "data": data.name,
                  "baseline_key": key, "min_improvement": cfg.min_improvement,
                  "config": json.dumps(asdict(cfg), sort_keys=True)},
    )


def dockerfile(cfg: Config) -> str:
    """CPU: Debian bookworm's python3-torch (1.13) from the Debian mirror, the only package
    source a container build can reach here, with OpenBLAS (Debian's default reference BLAS
    makes a matmul about 10x slower). GPU: the user's local CUDA PyTorch image."""
    if cfg.mode == "smoke":
        head = ("FROM debian:bookworm\n"
                "RUN apt-get update && apt-get install -y --no-install-recommends python3-torch python3-numpy"
                " libopenblas0-pthread && rm -rf /var/lib/apt/lists/*\n")
    else:
        head = f"FROM {cfg.image}\n"
    return head + (
        f"RUN (useradd -M -d /app -u {AGENT_UID} -s /bin/bash agent || adduser --disabled-password --no-create-home --home /app --uid {AGENT_UID} agent)"
        f" && (useradd -M -d /nonexistent -u {TRAINER_UID} -s /bin/sh trainer || adduser --disabled-password --no-create-home --uid {TRAINER_UID} trainer)\n"
        "COPY app/ /app/\n"
        "RUN chown -R root:root /app && chmod -R a+rX,go-w /app && mkdir -p /app/out"
        " && chown agent:agent /app /app/out /app/train.py\n"
        "ENV HOME=/app PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1\n"
        "WORKDIR /app\n"
    )


def _verifier_dir(ver_dir: Path, app: Path, data: Path) -> None:
    """score.py, the pristine prepare.py and baseline train.py, and the hidden split: 0700/0600."""
    (ver_dir / "data").mkdir(parents=True, exist_ok=True)
    for src, rel in ((FILES / "score.py", "score.py"), (FILES / "prepare.py", "prepare.py"),
                     (FILES / "train.py", "baseline_train.py"), (data / "val.bin", "val.bin"),
                     (data / "token_bytes.npy", "data/token_bytes.npy"), (data / "vocab.json", "data/vocab.json"),
                     (app / "data" / "meta.json", "data/meta.json")):
        _private_write(ver_dir / rel, src.read_bytes())
    for d in (ver_dir, ver_dir / "data"):
        d.chmod(0o700)


def _private_write(path: Path, content: str | bytes) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(content.encode() if isinstance(content, str) else content)


def _link_or_copy(src: Path, dest: Path) -> None:
    if dest.exists() and dest.stat().st_size == src.stat().st_size and _sha256(dest) == _sha256(src):
        return
    dest.unlink(missing_ok=True)
    shutil.copy(src, dest)


def _files_digest() -> str:
    h = hashlib.sha256()
    for name in ("prepare.py", "train.py", "score.py"):
        h.update((FILES / name).read_bytes())
    return h.hexdigest()[:16]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
