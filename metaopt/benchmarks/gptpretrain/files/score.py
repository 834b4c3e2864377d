"""The fixed scorer of the gptpretrain task. Copied into /verifier only after the agent stops and
run there as root, in a fresh exec:

    python3 /verifier/score.py fingerprint      print this machine's hardware fingerprint (JSON)
    python3 /verifier/score.py run [--baseline] retrain and evaluate; write /verifier/result.json

`run`: stop every process of the agent's user; check prepare.py and data/ against the checksums
taken when the task was built; read the validation split into memory and delete its file; lock
the agent's files away (mode go-rwx, /app root-only); then for the baseline train.py (with
--baseline) and the agent's final train.py: copy it with the pristine prepare.py and the checked
data into a fresh directory owned by a separate user, `trainer`, and run it there with a hard
time limit (budget + start-up grace). A run is a failure, with its reason and log tail, when it
crashes, overruns, writes a file outside its directory, saves no checkpoint, or its checkpoint
does not load, uses a forbidden operator, has the wrong output shape or a non-finite loss.
val_bpb is computed here, from the checkpoint, never taken from what train.py prints.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import time

VERIFIER = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, VERIFIER)
APP = "/app"
SCORING = "/scoring"
SKIP_WALK = ("/proc", "/sys", "/dev", SCORING)
AGENT, TRAINER = "agent", "trainer"


def main() -> int:
    if sys.argv[1:2] == ["fingerprint"]:
        print(json.dumps(fingerprint(), sort_keys=True))
        return 0
    if sys.argv[1:2] != ["run"]:
        print(__doc__)
        return 2
    result = {"fingerprint": fingerprint(), "candidate": None, "baseline": None}
    agent, trainer = pwd.getpwnam(AGENT).pw_uid, pwd.getpwnam(TRAINER).pw_uid
    kill_user(agent)
    kill_user(trainer)
    tampered = check_files()
    import numpy as np  # after the checks: nothing above needs them

    val = np.fromfile(os.path.join(VERIFIER, "val.bin"), dtype=np.uint16)
    os.remove(os.path.join(VERIFIER, "val.bin"))  # a checkpoint cannot read what is not on disk
    lock_away(agent)
    shutil.rmtree(SCORING, ignore_errors=True)
    os.makedirs(SCORING, mode=0o711)
    runs = []
    if "--baseline" in sys.argv:
        runs.append(("baseline", os.path.join(VERIFIER, "baseline_train.py")))
    runs.append(("candidate", os.path.join(APP, "train.py")))
    for name, train_py in runs:
        if name == "candidate" and tampered:
            result[name] = failure("tampered", tampered)
            continue
        if not os.path.isfile(train_py):
            result[name] = failure("no_train_py", "train.py is missing")
            continue
        r = train(name, train_py, trainer)
        if r["status"] == "ok":
            r.update(evaluate(os.path.join(SCORING, name, "out", "model.pt"), val))
        result[name] = r
        shutil.rmtree(os.path.join(SCORING, name))  # the candidate must not warm-start from the baseline
    with open(os.path.join(VERIFIER, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    return 0


def fingerprint() -> dict:
    """What decides how far a fixed-time run gets: CPU model and usable cores, GPUs, torch."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0))
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    import torch

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return {"cpu": cpu, "cores": cores, "gpus": gpus, "torch": torch.__version__, "machine": platform.machine()}


def check_files() -> str | None:
    """None, or the reason the fixed files differ from the checksums taken at build time."""
    with open(os.path.join(VERIFIER, "expected.json")) as f:
        expected = json.load(f)
    for rel, digest in expected.items():
        path = os.path.join(APP, rel)
        if not os.path.isfile(path) or os.path.islink(path):
            return f"{rel} is missing or replaced by a link"
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        if h.hexdigest() != digest:
            return f"{rel} was modified (checksum mismatch); prepare.py and data/ are fixed"
    return None


def kill_user(uid: int) -> None:
    """Kill every process of `uid` but the container's own: PID 1 and its `sleep infinity`
    keep-alive, which run as the agent's user when the container was started as it."""
    for _ in range(3):
        pids = [p for p in os.listdir("/proc") if p.isdigit() and _owner(p) == uid and not _keep_alive(p)]
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        if not pids:
            return
        time.sleep(0.2)


def _keep_alive(pid: str) -> bool:
    if pid == "1":
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            ppid = f.read().rsplit(")", 1)[1].split()[1]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return ppid == "1" and cmd == b"sleep\0infinity\0"


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def owned_files(uid: int, inside: str | None = None) -> list[str]:
    """Files and dirs owned by `uid` anywhere but /proc, /sys, /dev (except /dev/shm) and `inside`."""
    found = []
    roots = ["/", "/dev/shm"]
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            if root == "/" and dirpath == "/":
                dirnames[:] = [d for d in dirnames if "/" + d not in SKIP_WALK]
            if inside and (dirpath == inside or dirpath.startswith(inside + "/")):
                dirnames[:] = []
                continue
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if inside and path == inside:
                    continue
                try:
                    if os.lstat(path).st_uid == uid:
                        found.append(path)
                except OSError:
                    pass
    return found


def lock_away(agent: int) -> None:
    """Make everything the agent left readable by root only, so a retrain cannot load it."""
    os.chown(APP, 0, 0)
    os.chmod(APP, 0o700)
    for path in owned_files(agent):
        try:
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
        except OSError:
            pass


def train(name: str, train_py: str, trainer: int) -> dict:
    """Run one train.py as `trainer` in /scoring/NAME under the hard time limit."""
    import prepare as P  # the pristine copy next to this file

    run = os.path.join(SCORING, name)
    os.makedirs(os.path.join(run, "data"))
    shutil.copy(os.path.join(VERIFIER, "prepare.py"), run)
    shutil.copy(train_py, os.path.join(run, "train.py"))
    for f in os.listdir(os.path.join(APP, "data")):
        shutil.copy(os.path.join(APP, "data", f), os.path.join(run, "data", f))
    for d in ("out", "tmp"):
        os.makedirs(os.path.join(run, d))
    for dirpath, dirnames, filenames in os.walk(run):
        for n in dirnames + filenames:
            os.chmod(os.path.join(dirpath, n), 0o755 if n in dirnames else 0o644)
    for path in (run, os.path.join(run, "out"), os.path.join(run, "tmp")):
        os.chown(path, trainer, trainer)
    tmp = os.path.join(run, "tmp")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "TMPDIR": tmp,
           "XDG_CACHE_HOME": tmp, "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"),
           "TRITON_CACHE_DIR": os.path.join(tmp, "triton"), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONUNBUFFERED": "1", "LANG": "C.UTF-8"}
    for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "OMP_NUM_THREADS"):
        if k in os.environ:
            env[k] = os.environ[k]
    wall_limit, cpu_limit = P.hard_limits()
    log_path = os.path.join(VERIFIER, f"{name}.log")
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "train.py"], cwd=run, env=env, stdout=log, stderr=subprocess.STDOUT,
                                user=trainer, group=trainer, extra_groups=[], start_new_session=True,
                                preexec_fn=P.limit_cpu)
        try:
            code = proc.wait(timeout=wall_limit)
        except subprocess.TimeoutExpired:
            code = None
    wall = time.monotonic() - t0
    kill_user(trainer)
    proc.wait()
    with open(log_path, errors="replace") as f:
        lines = f.read().splitlines()
    summary = _summary(lines)
    tail = "\n".join(lines[-40:])
    base = {"wall_seconds": round(wall, 1), **summary}
    if P.overran(code):
        limits = f"{wall_limit:.0f} wall s" + (f" / {cpu_limit:.0f} CPU s" if cpu_limit else "")
        return failure("overrun", f"train.py ran past its limit ({limits}: {P.TIME_BUDGET:g} s budget + "
                       f"{P.GRACE:g} s start-up) and was killed", tail, base)
    if code != 0:
        nan = any("nan" in line.lower() for line in lines[-5:])
        return failure("nan_loss" if nan else "train_crash", f"train.py exited with code {code}", tail, base)
    outside = owned_files(trainer, inside=run)
    if outside:
        return failure("wrote_outside", f"train.py wrote outside its directory: {', '.join(outside[:5])}", tail, base)
    if not os.path.isfile(os.path.join(run, "out", "model.pt")):
        return failure("no_checkpoint", "train.py saved no checkpoint (prepare.save_checkpoint(model) -> out/model.pt)",
                       tail, base)
    return {"status": "ok", **base, "log_tail": tail}


def _summary(lines: list[str]) -> dict:
    """train.py's own `key: number` lines after '---' (self-reported, informational only)."""
    out = {}
    if "---" in lines:
        for line in lines[len(lines) - 1 - lines[::-1].index("---") + 1:]:
            key, _, value = line.partition(":")
            try:
                if key.strip() in ("training_seconds", "tokens_per_second", "mfu_percent", "steps", "num_params"):
                    out[key.strip()] = float(value)
            except ValueError:
                pass
    return out


def evaluate(path: str, val) -> dict:
    import numpy as np

    import prepare as P

    try:
        model = P.load_checkpoint(path)
        r = P.evaluate_bpb(model, val, np.load(os.path.join(VERIFIER, "data", "token_bytes.npy")))
    except Exception as e:  # any bad checkpoint is the candidate's failure, with the reason
        return failure("bad_checkpoint", f"checkpoint could not be evaluated: {type(e).__name__}: {str(e)[:500]}")
    if not math.isfinite(r["bpb"]):
        return failure("nan_loss", "validation loss is not finite (NaN or inf)")
    return {"val_bpb": r["bpb"], "val_tokens": r["tokens"], "val_bytes": r["bytes"]}


def failure(mode: str, reason: str, tail: str = "", extra: dict | None = None) -> dict:
    return {**(extra or {}), "status": "failed", "failure_mode": mode, "reason": reason, "log_tail": tail}


if __name__ == "__main__":
    sys.exit(main())
