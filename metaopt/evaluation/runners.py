"""Recognised test runners: the standard verifier scripts that run on the locked toolchain.

`recognise(task)` reads the task's verifier script on the host and, when its structure is one of
the standard templates, returns a `Plan`: what the script does, re-expressed as a script for the
static busybox sh that runs pytest (or the SpreadsheetBench evaluator) on the locked interpreter
(sandbox.verify_toolchain) in isolated mode: `python -I` (no user site, no cwd, no PYTHON*
variables), PYTEST_DISABLE_PLUGIN_AUTOLOAD=1, `-p no:cacheprovider`, rootdir and conftest cut at
the tests' folder with `-c /dev/null` (no ini or conftest outside it), an environment of its own
(`env -i`: no PYTHON*/UV*/PIP*/LD_* from anywhere), PATH starting with the toolchain.

Recognised, by structure rather than bytes (comments, blank lines, line continuations, quoting,
redirections of the setup steps and the order of uvx options do not matter):
- setup steps that only fetch the runner: apt-get update/install, the uv installer piped to sh,
  `source $HOME/.local/bin/env`, `uv init`, `uv add`/`pip install` of pytest and its ctrf plugin,
  `mkdir -p /logs/verifier`, `export PATH=...`, `set -e/+e`, `cd` to the workdir, echo, the
  template's "no working directory" check, `command -v uv` guards;
- one pytest call: `uvx [-p V] [--offline] [-w|--with pytest[==V]|pytest-json-ctrf[==V]]... pytest`,
  `uv run pytest`, `python3 -m pytest` or `pytest`, with arguments among test paths under the
  tests' folder, `-rA`-style report flags, `-v`/`-q`/`-x`, `--tb=...`, `-p no:cacheprovider` and
  `--ctrf <file under /logs/verifier>`;
- optionally the TB2 reward block: the exit status kept in a variable or tested as `$?`, and
  `echo 1`/`echo 0` (or 1.0/0.0) to /logs/verifier/reward.txt, then maybe `exit $status` (the
  plan writes no reward: the verdict is the launcher's report, below);
- the SpreadsheetBench evaluator command (`rm -rf <result>; python3 /tests/evaluate.py`).
The tests may import only the standard library, pytest, openpyxl and modules of their own folder.
Anything else runs the old way (`isolation: partial`), with the tamper scan as its defence.

A pytest plan ends in evaluation.runner_launch: the tests' process has a session of its own, no
new privileges, is not dumpable and (unless its files switch users: needs_root) holds no
capability; its results travel over a close-on-exec pipe to the launcher, which alone holds the
exec's stdout and writes there the report the scorer reads.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaopt.benchmarks.task import Task
from metaopt.sandbox.verify_toolchain import LockedToolchain, locked_toolchain

LOCKED_PACKAGES = frozenset({"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "ctrf",
                             "openpyxl", "et_xmlfile"})
"""Top-level modules the locked toolchain provides beside the standard library."""
REWARD_TXT = "/logs/verifier/reward.txt"
SCRUBBED = ("PYTHON", "UV_", "PIP_", "LD_")
RUNNER_PKGS = re.compile(r"(pytest|pytest-json-ctrf)([=<>~!]=?[\w.*]+)?")
SETUP = [re.compile(p) for p in (
    r"apt(-get)? (-\S+ )*update( .*)?",
    r"apt(-get)? (-\S+ )*install( -\S+)*( curl| ca-certificates| -\S+)+",  # the installer's own: not test tools
    r"rm -rf /var/lib/apt/lists/\*",
    r"curl .*astral\.sh/uv/.*\| *(ba)?sh( .*)?",
    r"(source|\.) \"?\$\{?HOME\}?/\.local/bin/env\"?( .*)?",
    r"mkdir -p /logs/verifier",
    r"export PATH=\S+",
    r"\(?set [-+][euxo]+( pipefail)?",
    r"echo( [^>|;&]*)?",
    r"uv init( .*)?", r"uv venv( .*)?",
    r"true", r"sync", r"sleep \d+",
)]


@dataclass(frozen=True)
class Plan:
    """What a recognised runner does: `kind` names the template, `script` is for the static sh
    (`$PY` is the isolated interpreter, `$T` the toolchain root)."""

    kind: str
    script: str
    tests: tuple[str, ...] = ()
    """The test files the script names (container paths): each must be among the task's files."""
    privilege: str = "none"
    """What the tests' process holds: `none` (no capability) or `root` (the tests switch users or
    change ownership: root's default capabilities, never CAP_SYS_PTRACE); see needs_root."""


def recognise(task: Task) -> Plan | None:
    """The isolated plan for `task`'s verifier, or None (run it the old way)."""
    if not _imports_locked(task):
        return None
    cmd = task.verifier.command.strip()
    if task.scoring == "spreadsheet":
        m = re.fullmatch(r"rm -rf (/[\w./-]+); python3 (/tests/evaluate\.py)", cmd)
        return Plan("spreadsheetbench", f"$BB rm -rf {m.group(1)}; exec $PY {m.group(2)}") if m else None
    if task.scoring not in ("pytest", "reward"):
        return None
    m = re.fullmatch(r"(?:bash|sh) (\S+\.sh)", cmd)
    test_dir = _test_dir(task)
    if not m or not test_dir:
        return None
    path = m.group(1).replace("$TEST_DIR", test_dir).replace("${TEST_DIR}", test_dir)
    host = _host_path(task, path)
    if host is None or not host.is_file():
        return None
    plan = parse_script(host.read_text(errors="replace"), test_dir, reward=task.scoring == "reward")
    if plan is None or not all(_host_path(task, t) is not None for t in plan.tests):
        return None  # a test file the task does not have: its verifier is broken, as written
    if needs_root(task):
        plan = Plan(plan.kind, plan.script.replace(" drop -- ", " root -- ", 1), plan.tests, "root")
    return plan


_SWITCHES = re.compile(r"\b(?:su|runuser|setpriv|sudo|chroot|chown|chgrp|useradd|usermod|userdel|groupadd|"
                       r"setuidgid|capsh|set(?:e|re|res)?[ug]id|initgroups|setgroups|lchown|fchown)\b|"
                       r"\b(?:pkill|killall)\s+-u\b|\bsudo\b|"
                       r"\b(?:user|group|extra_groups)=[\"'\w]")  # subprocess.run(..., user="nobody")


def needs_root(task: Task) -> bool:
    """Whether the task's test files switch users or change ownership (`su alice -c ...`,
    os.setuid, chown): their tests then keep root's default capabilities (Plan.privilege)."""
    for host, _ in task.verifier.files:
        host = Path(host)
        for p in (sorted(host.rglob("*")) if host.is_dir() else [host]):
            if p.is_file() and p.stat().st_size < 1 << 20 and _SWITCHES.search(p.read_text(errors="replace")):
                return True
    return False


def _host_path(task: Task, path: str) -> Path | None:
    """The host file copied to container `path`, or None."""
    for h, d in task.verifier.files:
        h = Path(h)
        if path == d and h.is_file():
            return h
        if h.is_dir() and path.startswith(d.rstrip("/") + "/") and (h / path[len(d.rstrip("/")) + 1:]).exists():
            return h / path[len(d.rstrip("/")) + 1:]
    return None


def parse_script(text: str, test_dir: str, reward: bool) -> Plan | None:
    """The plan for a runner script's text, or None when its structure is not a standard one."""
    run: list[str] | None = None
    status, cwd, wrote = {"$?"}, "", False
    for item in _blocks(_logical_lines(text)):
        if isinstance(item, list):  # an if ... fi block
            head = item[0]
            args = _pytest_args(head[3:], test_dir) if run is None else None
            if args is not None:  # `if uvx ... pytest ...; then echo 1 > reward ...`
                run, item = args, ["if [ $? -eq 0 ]", *item[1:]]
            if run is not None and _reward_block(item, status):
                wrote = True
            elif run is not None or not _setup_block(item):
                return None
            continue
        line = item
        m = re.fullmatch(r"cd (\S+)(?: && (.+))?", line)
        if m and ".." not in m.group(1):
            cwd = m.group(1)
            if not m.group(2):
                continue
            line = m.group(2)
        if _setup(line):
            continue
        if run is None:
            m = re.fullmatch(r"(.+?) \|\| (\w+)=\$\?", line)
            if m:
                status.add(f"${m.group(2)}")
                line = m.group(1)
            run = _pytest_args(line, test_dir)
            if run is None:
                return None
            continue
        var = re.fullmatch(r"(\w+)=\"?\$(\?|\{(\w+):-0\})\"?", line)
        if var and (var.group(2) == "?" or f"${var.group(3)}" in status):
            status.add(f"${var.group(1)}")
            continue
        if re.fullmatch(r"exit (0|\"?\$\{?\w+\}?(:-\d)?\"?)", line):
            continue
        return None
    if run is None or (reward and not wrote):
        return None
    tests = tuple(a.split("::")[0] for a in run[1:] if a.startswith(test_dir))
    return Plan("tb2" if wrote else "tb1", _script(run, cwd), tests)


def _blocks(lines: list[str]) -> list[str | list[str]]:
    """Lines, with each if ... fi (not nested) gathered in a list."""
    out: list[str | list[str]] = []
    cur: list[str] | None = None
    for line in lines:
        if cur is None and line.startswith("if "):
            cur = [line]
        elif cur is not None:
            cur.append(line)
        else:
            out.append(line)
        if cur is not None and line == "fi":
            out.append(cur)
            cur = None
    if cur is not None:
        out.append(cur)  # unterminated: _setup_block and _reward_block refuse it
    return out


def _setup_block(block: list[str]) -> bool:
    """An if block before the runner that only fetches it or checks the working directory."""
    if block[-1] != "fi":
        return False
    head = block[0]
    if not re.fullmatch(r'if (\[ -f /etc/\w+ \]|\[ "\$PWD" = "/" \]|! command -v uvx?( [^;]*)?)', head):
        return False
    body = [b for b in block[1:-1] if b not in ("then", "else")]
    return all(_setup(b) or b == "exit 1" or "astral.sh/uv/" in b and b.rstrip(") |&0-9$?").endswith(("sh", "exit"))
               for b in body)


def _script(args: list[str], cwd: str) -> str:
    """The launcher (evaluation.runner_launch) running pytest, as the script's last exec: the verdict
    is its report on the exec's stdout, never the tests' output or a reward file
    (benchmarks.scoring.score_runner_report). `drop` becomes `root` for tests that switch users."""
    flags = ["-p", "no:cacheprovider", "-c", "/dev/null", f"--rootdir={args[0]}", f"--confcutdir={args[0]}"]
    if any(a == "--ctrf" for a in args[1:]):
        flags += ["-p", "ctrf.main"]
    call = f'exec $PY -c "$MO_LAUNCH" {shlex.quote(args[0])} drop -- ' + " ".join(shlex.quote(a) for a in [*flags, *args[1:]])
    return f"cd {shlex.quote(cwd)} && {call}\n" if cwd else f"{call}\n"


def _pytest_args(line: str, test_dir: str) -> list[str] | None:
    """[test_dir, *pytest args] when `line` is one pytest call with standard arguments."""
    line = re.sub(r"\s+2>&1$", "", line)
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    words = [w.replace("${TEST_DIR}", test_dir).replace("$TEST_DIR", test_dir) for w in words]
    i = 0
    if words[:1] == ["uvx"]:
        i = 1
        while i < len(words) and words[i] not in ("pytest", "python", "python3"):
            w = words[i]
            if w in ("-p", "--python", "-w", "--with") and i + 1 < len(words):
                if w in ("-w", "--with") and not RUNNER_PKGS.fullmatch(words[i + 1]):
                    return None
                i += 2
            elif w in ("--offline", "-q", "--quiet", "--no-progress"):
                i += 1
            else:
                return None
    elif words[:3] == ["uv", "run", "pytest"]:
        i = 2
    if words[i:i + 3] in (["python3", "-m", "pytest"], ["python", "-m", "pytest"]):
        i += 2
    if i >= len(words) or words[i] != "pytest":
        return None
    args, rest = [], words[i + 1:]
    j = 0
    while j < len(rest):
        a = rest[j]
        if a.startswith("--ctrf="):
            rest[j:j + 1], a = ["--ctrf", a[7:]], "--ctrf"
        if a == "--ctrf" and j + 1 < len(rest) and re.fullmatch(r"/logs/verifier/[\w.-]+\.json", rest[j + 1]):
            args += rest[j:j + 2]
            j += 2
            continue
        if a == "-p" and j + 1 < len(rest) and rest[j + 1] == "no:cacheprovider":
            j += 2
            continue
        flag = re.fullmatch(r"-r[a-zA-Z]+|-v+|-q+|-x|-s|--tb=\w+|--color=\w+|--durations=\d+", a)
        path = (a == test_dir or a.startswith(test_dir + "/")) and ".." not in a and re.fullmatch(r"[\w./:\[\]-]+", a)
        if not (flag or path):
            return None
        args.append(a)
        j += 1
    if not any(a.startswith(test_dir) for a in args):
        return None
    return [test_dir, *args]


def _setup(line: str) -> bool:
    if re.fullmatch(r"(uv add|uv pip install|pip3? install)( .*)?", line):  # only the runner's own packages
        try:
            words = shlex.split(line)
        except ValueError:
            return False
        pkgs = [w for w in words[2 if words[0] != "uv" or words[1] == "add" else 3:] if not w.startswith("-")]
        return all(RUNNER_PKGS.fullmatch(p) for p in pkgs)
    if re.fullmatch(r"cd \S+", line):
        return True
    parts = [p.strip() for p in re.split(r"\s*(?:&&|\|\||;)\s*", re.sub(r"\s*[12]?>\s*/dev/null( 2>&1)?", "", line))]
    return all(any(p.fullmatch(q) for p in SETUP) for q in parts if q)


def _reward_block(block: list[str], status: set[str]) -> bool:
    text = " ; ".join(block)
    cond = r"if \[ \"?(?P<v>\$\{?\w+\}?|\$\?)(:-1)?\"? -eq 0 \]"
    m = re.fullmatch(cond + r" ; then((?: ; (?:echo [^>;]*|echo \"?1(\.0)?\"? > /logs/verifier/reward\.txt))+)"
                     r" ; else((?: ; (?:echo [^>;]*|echo \"?0(\.0)?\"? > /logs/verifier/reward\.txt))+) ; fi", text)
    if not m:
        return False
    v = m.group("v").replace("{", "").replace("}", "")
    return (v in status or v == "$?") and text.count(REWARD_TXT) == 2


def _logical_lines(text: str) -> list[str]:
    """Comment-free simple commands, continuations joined, split at `;` outside quotes, with
    `then`/`else`/`fi` as commands of their own."""
    out: list[str] = []
    for raw in text.replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+", " ", raw.strip())
        if not line or line.startswith("#"):
            continue
        for part in _split(line):
            m = re.fullmatch(r"(then|else|do) (.+)", part)
            out += [m.group(1), m.group(2)] if m else [part]
    return out


def _split(line: str) -> list[str]:
    """`line` cut at `;` outside quotes, a trailing ` # comment` dropped."""
    parts, cur, quote = [], "", ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ";":
            parts.append(cur)
            cur = ""
            continue
        elif ch == "#" and (i == 0 or line[i - 1] == " "):
            break
        cur += ch
    return [p.strip() for p in [*parts, cur] if p.strip()]


def _test_dir(task: Task) -> str | None:
    tops = {"/" + d.strip("/").split("/")[0] for _, d in task.verifier.files}
    return tops.pop() if len(tops) == 1 else None


def _imports_locked(task: Task) -> bool:
    """Every module the verifier's Python files import is in the locked toolchain or theirs."""
    own: set[str] = set()
    trees = []
    for host, _ in task.verifier.files:
        host = Path(host)
        for p in (sorted(host.rglob("*.py")) if host.is_dir() else [host] if host.suffix == ".py" else []):
            own.add(p.stem)
            try:
                trees.append(ast.parse(p.read_text(errors="replace")))
            except (SyntaxError, ValueError, OSError):
                return False
    allowed = set(sys.stdlib_module_names) | LOCKED_PACKAGES | own
    for tree in trees:
        for n in ast.walk(tree):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module] if isinstance(n, ast.ImportFrom) and n.module and not n.level else []
            if any(name.split(".")[0] not in allowed for name in names):
                return False
    return True


def isolated_env(task: Task, home: str, path: str) -> dict[str, str]:
    """The isolated runner's whole environment: the task's declared variables minus PYTHON*/UV*/
    PIP*/LD_*, a fixed locale, plugin autoload off."""
    env = {k: v for k, v in task.verifier.env.items() if not k.startswith(SCRUBBED)}
    test_dir = _test_dir(task) or "/tests"
    return {**env, "PATH": path, "HOME": home, "TEST_DIR": test_dir, "LANG": "C.UTF-8",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1", "TERM": "dumb"}


def locked_plan(task: Task, api: Any) -> tuple[Plan | None, LockedToolchain | None, str]:
    """(plan, locked toolchain, why not) for a trial whose verifier runs in a fresh container."""
    plan = recognise(task)
    if plan is None:
        return None, None, "the verifier script is not a recognised runner"
    locked = locked_toolchain(api)
    if locked is None:
        return plan, None, "no locked toolchain (the metaopt base image is absent or its build failed)"
    return plan, locked, ""


def verifier_argv(task: Task, plan: Plan, locked: LockedToolchain, busybox: str, home: str,
                  path_dirs: tuple[str, ...]) -> list[str]:
    """The verifier's whole command: `env -i` and the static sh running the plan; pytest plans
    end in the launcher (evaluation.runner_launch), whose report is the exec's stdout."""
    path = ":".join([f"{locked.root}/bin", *path_dirs])
    env = isolated_env(task, home, path)
    if plan.kind == "spreadsheetbench":  # the agent's script is re-run by the agent's own python3
        env["SSB_SCRIPT_PYTHON"] = "python3"
    else:
        env["MO_LAUNCH"] = LAUNCHER.read_text()
    head = f"PY={shlex.quote(' '.join(locked.python()))}\nBB={shlex.quote(busybox)}\n"
    return [busybox, "env", "-i", *(f"{k}={v}" for k, v in sorted(env.items())), busybox, "sh", "-c", head + plan.script]


LAUNCHER = Path(__file__).with_name("runner_launch.py")
