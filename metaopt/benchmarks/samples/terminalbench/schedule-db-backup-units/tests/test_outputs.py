import gzip
import os
import re
import sqlite3
import stat
import subprocess
from pathlib import Path

UNITS = Path("/etc/systemd/system")
BACKUPS = Path("/var/backups/db")
SERVICE = """[Unit]
Description=Nightly database backup
After=network-online.target

[Service]
Type=oneshot
EnvironmentFile=/etc/default/db-backup
ExecStart=/usr/local/sbin/db-backup
Nice=10
"""
TIMER = """[Unit]
Description=Run db-backup every night

[Timer]
OnCalendar=*-*-* 02:15:00
RandomizedDelaySec=10m
Persistent=true

[Install]
WantedBy=timers.target
"""
DEFAULTS = """DB_PATH=/app/ops/app.db
BACKUP_DIR=/var/backups/db
RETENTION_DAYS=14
"""
CRON = """SHELL=/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
30 4 * * * root find /var/backups/db -name 'app-*.sql.gz' -mtime +14 -delete
"""


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def significant(text):
    """Lines that matter: stripped, without blank lines and comments."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith(("#", ";"))]


def check_file(path, expected, want_mode=None):
    path = Path(path)
    assert path.is_file(), f"{path} is missing"
    assert significant(path.read_text()) == significant(expected), f"{path} has the wrong contents"
    if want_mode is not None:
        assert mode(path) == want_mode, f"{path}: {oct(mode(path))}"


def test_script_installed():
    script = Path("/usr/local/sbin/db-backup")
    assert script.is_file(), f"{script} is missing"
    assert script.read_bytes() == Path("/app/ops/db-backup.sh").read_bytes()
    assert mode(script) == 0o755, oct(mode(script))


def test_defaults_file():
    check_file("/etc/default/db-backup", DEFAULTS, 0o600)


def test_service_unit():
    check_file(UNITS / "db-backup.service", SERVICE)


def test_timer_unit():
    check_file(UNITS / "db-backup.timer", TIMER)


def test_timer_enabled():
    link = UNITS / "timers.target.wants" / "db-backup.timer"
    assert link.is_symlink(), f"{link} is not a symlink"
    assert os.path.realpath(link) == str(UNITS / "db-backup.timer")


def test_cron_file():
    path = Path("/etc/cron.d/db-backup-prune")
    check_file(path, CRON, 0o644)
    assert path.read_text().endswith("\n"), "cron ignores a last line without a newline"


def test_backup_dir():
    assert BACKUPS.is_dir(), f"{BACKUPS} is missing"
    assert mode(BACKUPS) == 0o750, oct(mode(BACKUPS))


def test_first_backup(tmp_path):
    dumps = sorted(BACKUPS.glob("*.sql.gz"))
    assert len(dumps) == 1, f"expected exactly one backup in {BACKUPS}, found {dumps}"
    assert re.fullmatch(r"app-\d{8}-\d{6}\.sql\.gz", dumps[0].name), dumps[0].name
    with gzip.open(dumps[0], "rt") as fh:
        sql = fh.read()
    restored = tmp_path / "restored.db"
    subprocess.run(["sqlite3", str(restored)], input=sql, text=True, check=True)
    con = sqlite3.connect(restored)
    assert con.execute("SELECT count(*), sum(balance_cents) FROM accounts").fetchone() == (4, 537325)
