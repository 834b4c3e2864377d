import hashlib
import json
import os
import subprocess
import time

WAL_DIR = "/var/lib/ledgerd/wal"
REPORT = "/app/reports/balances.csv"
HEAD = "/app/reports/HEAD"
WAL_SHA256 = "63b32cb65d8b76c6687e8368415a675232ebc07ad8469dc9609dc07591087b58"


def wal_balances():
    balances, head = {}, None
    for name in sorted(os.listdir(WAL_DIR)):
        with open(os.path.join(WAL_DIR, name)) as f:
            for line in f.read().splitlines()[1:]:
                txid, debit, credit, cents = line.split()
                balances[debit] = balances.get(debit, 0) - int(cents)
                balances[credit] = balances.get(credit, 0) + int(cents)
                head = txid
    return balances, head


def get(path):
    last = None
    for _ in range(20):
        last = subprocess.run(["curl", "-s", "-m", "5", "-w", "\n%{http_code}", f"http://127.0.0.1:9400{path}"],
                              capture_output=True, text=True)
        if last.returncode == 0:
            break
        time.sleep(0.25)
    assert last.returncode == 0, f"nothing answers on 127.0.0.1:9400 (curl exit {last.returncode})"
    body, _, code = last.stdout.rpartition("\n")
    return int(code), body


def test_wal_untouched():
    h = hashlib.sha256()
    for name in sorted(os.listdir(WAL_DIR)):
        with open(os.path.join(WAL_DIR, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    assert h.hexdigest() == WAL_SHA256, "the write-ahead log was modified"


def test_balances_csv():
    assert os.path.isfile(REPORT), f"{REPORT} is missing"
    with open(REPORT) as f:
        lines = f.read().splitlines()
    assert lines[0] == "account,balance_cents"
    balances, _ = wal_balances()
    expected = [f"{acct},{balances[acct]}" for acct in sorted(balances)]
    assert lines[1:] == expected


def test_head_file():
    assert os.path.isfile(HEAD), f"{HEAD} is missing"
    with open(HEAD) as f:
        assert f.read() == "tx5000\n"


def test_service_still_running_and_ready():
    code, body = get("/healthz")
    assert code == 200, f"/healthz answered {code}: {body}"
    assert json.loads(body)["status"] == "ready"
    code, body = get("/v1/balances")
    assert code == 200
    assert json.loads(body)["head"] == "tx5000"
