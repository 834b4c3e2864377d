"""Fixed part of the GPT pretraining task: data, tokenizer tables, checkpoint format, evaluation.

DO NOT EDIT: this file and data/ are checksummed before scoring; a changed copy scores nothing.

    python3 prepare.py run          train (python3 train.py, within the time budget) and print a
                                    summary with dev_bpb, the bits per byte on the dev split
    python3 prepare.py eval CKPT    dev_bpb of a saved checkpoint

What train.py gets from here: VOCAB_SIZE, SEQ_LEN, TIME_BUDGET (seconds of training by clock(),
compilation excluded; CPU seconds in smoke mode, wall seconds on GPU), clock(), DEVICE, MODE ('smoke' on CPU, 'gpu'), `batches(batch_size)` (random windows of the
training tokens, (x, y) on DEVICE), `decode(ids)`, and `save_checkpoint(model)`. The model's
forward(idx) takes int64 token ids of shape (EVAL_BATCH, SEQ_LEN) and returns logits of shape
(EVAL_BATCH, SEQ_LEN, VOCAB_SIZE); save_checkpoint traces it to TorchScript, so the evaluator needs
no code from train.py. The final score is the same measurement on a validation split that is
never inside this sandbox while you work.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
with open(os.path.join(DATA, "meta.json")) as _f:
    META = json.load(_f)

MODE: str = META["mode"]
VOCAB_SIZE: int = META["vocab_size"]
BOS_ID: int = META["bos_id"]
SEQ_LEN: int = META["seq_len"]
EVAL_BATCH: int = META["eval_batch"]
TIME_BUDGET: float = float(META["time_budget_s"])
GRACE: float = float(META["grace_s"])
DEVICE = "cuda" if MODE == "gpu" and torch.cuda.is_available() else "cpu"
CHECKPOINT = os.path.join(HERE, "out", "model.pt")
if DEVICE == "cpu" and MODE == "smoke":
    # One thread: on a small machine shared with other work, OpenMP threads spin-wait and run
    # several times slower than one. train.py may call torch.set_num_threads() to change it.
    torch.set_num_threads(1)
FORBIDDEN_OPS = ("aten::from_file", "aten::save", "aten::load")


def clock() -> float:
    """The budget's clock. smoke: CPU seconds of this process (all its threads), so that a run on
    a machine shared with other work gets as much compute as one on a quiet machine; gpu: wall
    seconds. train.py should stop when clock() has advanced TIME_BUDGET past its start."""
    return time.process_time() if MODE == "smoke" else time.perf_counter()


def hard_limits() -> tuple:
    """(wall seconds, CPU seconds or None) after which a training run is killed. smoke: the CPU
    limit is the kernel's RLIMIT_CPU (budget + grace); the wall limit only stops idle loops."""
    if MODE == "smoke":
        return 4 * (TIME_BUDGET + GRACE), TIME_BUDGET + GRACE
    return TIME_BUDGET + GRACE, None


def limit_cpu() -> None:
    """preexec_fn for a training process: apply the CPU part of hard_limits()."""
    import resource

    cpu = hard_limits()[1]
    if cpu is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(cpu), math.ceil(cpu) + 5))


def overran(code) -> bool:
    """Whether a training process's return code (None: wall limit hit) means it was stopped by a limit."""
    return code is None or code in (-signal.SIGXCPU, -signal.SIGKILL)


def tokens(split: str = "train") -> np.ndarray:
    """The token ids of the train or dev split (uint16, memory-mapped)."""
    if split not in ("train", "dev"):
        raise ValueError("only the train and dev splits are here")
    return np.memmap(os.path.join(DATA, f"{split}.bin"), dtype=np.uint16, mode="r")


def batches(batch_size: int, seq_len: int = SEQ_LEN, seed: int = 0, device: str = DEVICE):
    """Endless (x, y) int64 batches of random windows of the training tokens; y is x shifted by 1."""
    data = tokens("train")
    rng = np.random.default_rng(seed)
    while True:
        starts = rng.integers(0, len(data) - seq_len - 1, size=batch_size)
        window = np.stack([data[s:s + seq_len + 1] for s in starts]).astype(np.int64)
        t = torch.from_numpy(window)
        if device == "cuda":
            t = t.pin_memory().to(device, non_blocking=True)
        yield t[:, :-1], t[:, 1:]


_VOCAB = None


def decode(ids) -> str:
    """Text of a list of token ids (for looking at samples)."""
    global _VOCAB
    if _VOCAB is None:
        with open(os.path.join(DATA, "vocab.json")) as f:
            _VOCAB = [bytes.fromhex(h) for h in json.load(f)]
    return b"".join(_VOCAB[int(i)] for i in ids).decode("utf-8", "replace")


def save_checkpoint(model: torch.nn.Module, path: str = CHECKPOINT) -> str:
    """Trace `model` (forward(idx) -> logits) to TorchScript at the evaluation shape and save it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    model.eval()
    device = next(model.parameters()).device
    example = torch.zeros(EVAL_BATCH, SEQ_LEN, dtype=torch.long, device=device)
    with torch.no_grad():
        traced = torch.jit.trace(model, example, check_trace=False)
    traced.save(path)
    return path


def load_checkpoint(path: str, device: str = DEVICE):
    """Load a traced checkpoint, refusing graphs that touch files. Raises ValueError."""
    model = torch.jit.load(path, map_location=device)
    for kind in sorted(_op_kinds(model.inlined_graph)):
        if kind in FORBIDDEN_OPS or not kind.startswith(("aten::", "prim::")):
            raise ValueError(f"checkpoint uses a forbidden operator {kind}")
    model.eval()
    return model


def _op_kinds(graph) -> set:
    kinds = set()
    for node in graph.nodes():
        kinds.add(node.kind())
        for block in node.blocks():
            kinds |= _op_kinds(block)
    return kinds


def evaluate_bpb(model, data: np.ndarray, token_bytes: np.ndarray, device: str = DEVICE) -> dict:
    """Bits per byte of `model` on `data`: summed cross-entropy (nats) over every target token
    that stands for text, / ln 2 / the bytes those tokens stand for. Whole batches of
    non-overlapping SEQ_LEN windows; the remainder is left out. Raises ValueError on a bad shape."""
    per_batch = EVAL_BATCH * SEQ_LEN
    n_batches = (len(data) - 1) // per_batch
    if n_batches < 1:
        raise ValueError("evaluation split is shorter than one batch")
    nbytes_table = torch.from_numpy(np.asarray(token_bytes, dtype=np.int64)).to(device)
    total_nats, total_bytes, tokens_seen = 0.0, 0, 0
    with torch.no_grad():
        for b in range(n_batches):
            chunk = np.asarray(data[b * per_batch: (b + 1) * per_batch + 1], dtype=np.int64)
            x = torch.from_numpy(chunk[:-1].reshape(EVAL_BATCH, SEQ_LEN)).to(device)
            y = torch.from_numpy(chunk[1:].reshape(EVAL_BATCH, SEQ_LEN)).to(device)
            logits = model(x)
            if tuple(logits.shape) != (EVAL_BATCH, SEQ_LEN, VOCAB_SIZE):
                raise ValueError(f"model returned logits of shape {tuple(logits.shape)}, "
                                 f"expected {(EVAL_BATCH, SEQ_LEN, VOCAB_SIZE)}")
            nll = F.cross_entropy(logits.float().reshape(-1, VOCAB_SIZE), y.reshape(-1), reduction="none")
            nb = nbytes_table[y.reshape(-1)]
            mask = nb > 0
            total_nats += float(nll[mask].double().sum())
            total_bytes += int(nb.sum())
            tokens_seen += int(mask.sum())
    bpb = total_nats / (math.log(2) * total_bytes)
    return {"bpb": bpb, "tokens": tokens_seen, "bytes": total_bytes}


def _token_bytes() -> np.ndarray:
    return np.load(os.path.join(DATA, "token_bytes.npy"))


def _eval_cmd(path: str) -> int:
    try:
        r = evaluate_bpb(load_checkpoint(path), tokens("dev"), _token_bytes())
    except Exception as e:  # a bad checkpoint is reported, not a traceback
        print(f"eval failed: {type(e).__name__}: {e}")
        return 1
    if not math.isfinite(r["bpb"]):
        print("eval failed: the loss is not finite (NaN or inf)")
        return 1
    print(f"dev_bpb: {r['bpb']:.6f}")
    return 0


def _run_cmd() -> int:
    """Run train.py under the hard time limit, then evaluate its checkpoint in a fresh process."""
    log_path = os.path.join(HERE, "run.log")
    if os.path.exists(CHECKPOINT):
        os.remove(CHECKPOINT)
    wall, cpu = hard_limits()
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "train.py"], cwd=HERE, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=limit_cpu)
        try:
            code = proc.wait(timeout=wall)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    elapsed = time.monotonic() - t0
    with open(log_path, errors="replace") as f:
        lines = f.read().splitlines()
    summary = lines[lines.index("---") + 1:] if "---" in lines else []
    print("---")
    print(f"wall_seconds: {elapsed:.1f}  (budget {TIME_BUDGET:g} s of prepare.clock() + {GRACE:g} s start-up;"
          f" killed past {wall:.0f} wall s" + (f" or {cpu:.0f} CPU s)" if cpu else ")"))
    if overran(code):
        print("status: overrun (killed by the time limit)")
    elif code != 0:
        print(f"status: crash (exit {code})")
    elif not os.path.exists(CHECKPOINT):
        print("status: no checkpoint (train.py must call prepare.save_checkpoint(model))")
    else:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "eval", CHECKPOINT], cwd=HERE,
                           capture_output=True, text=True)
        print("status: ok" if r.returncode == 0 else "status: eval failed")
        print(r.stdout.strip() or r.stderr.strip()[-2000:])
    for line in summary:
        print(line)
    if code != 0 or not summary:
        print("--- log tail (run.log) ---")
        print("\n".join(lines[-30:]))
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "run":
        sys.exit(_run_cmd())
    if cmd == "eval" and len(sys.argv) == 3:
        sys.exit(_eval_cmd(sys.argv[2]))
    print(__doc__)
    sys.exit(2)
