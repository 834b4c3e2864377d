"""What the task-format loaders share (benchmarks.tb1, benchmarks.harbor, benchmarks.spreadsheet.loader):
one-line pydantic errors, a Dockerfile's WORKDIR, whether a task's tests reach a service. Detecting
a format and loading a dataset with them is benchmarks.datasets, above the loaders."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from metaopt.core.errors import TaskFormatError

__all__ = ["TaskFormatError", "dockerfile_workdir", "first_error", "needs_services"]  # the loaders' error, from core

def first_error(e: ValidationError) -> str:
    """One line for the first pydantic error: `field 'a.b': message`."""
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(root)"
    if err["type"] == "missing":
        return f"missing required field '{loc}'"
    return f"field '{loc}': {err['msg']}"


def dockerfile_workdir(text: str) -> str | None:
    """The last WORKDIR of a Dockerfile, or None (= whatever the base image says)."""
    found = re.findall(r"^\s*WORKDIR\s+(\S+)", text, flags=re.MULTILINE | re.IGNORECASE)
    return found[-1].strip("\"'") if found else None


_SERVICE_WORDS = re.compile(
    r"\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0|::1|sockets?|https?|ports?|connect\w*|requests|urllib\d?|httpx|aiohttp|"
    r"psycopg\d?|psql|pg_\w+|redis\w*|mysql\w*|mariadb|mongo\w*|postgres\w*|sqlalchemy|grpc\w*|curl|wget|nc|netcat|"
    r"ncat|telnet|ssh\w*|s?ftp|smtp\w*|imap|dig|nslookup|servers?|services?|daemons?|systemctl|supervisor\w*|"
    r"pgrep|pkill|pidof|ps|psutil|process(?:es)?|listen\w*|nginx|apache\d?|httpd|uvicorn|gunicorn|flask|fastapi|"
    r"django|docker|kafka|rabbitmq|amqp|zmq|websockets?|tcp|udp|sock|ss|netstat|lsof|proc|background|database|"
    r"cron\w*|watch\w*|inotify\w*|queue|worker|broker|endpoint|api|url)\b", re.IGNORECASE)
_INSTALL_LINE = re.compile(r"astral\.sh|\bapt(?:-get)?\s+(?:-\S+\s+)*(?:update|install)|\bpip3?\s+install|\buvx?\s+(?:pip|add|venv|init|sync)", re.IGNORECASE)


def needs_services(instruction: str, test_files: list[Path]) -> bool:
    """Whether the task may need processes the agent started to stay up for its verifier (a
    server its tests talk to): its instruction or test files name a network, service or process
    word (installer lines of the test scripts aside, they fetch uv and pytest in every task).
    Otherwise every agent process is killed before the tests are copied in: a process kept
    alive beside the verifier could read the copied tests and write what they expect."""
    texts = [instruction]
    for p in test_files:
        for f in (sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p] if p.is_file() else []):
            try:
                texts.append(f.read_text(errors="replace")[:1 << 20])
            except OSError:
                return True
    return any(_SERVICE_WORDS.search(ln) for t in texts for ln in t.splitlines() if not _INSTALL_LINE.search(ln))
