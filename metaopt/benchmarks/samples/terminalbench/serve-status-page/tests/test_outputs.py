import json
import subprocess
import time


def curl(path):
    last = None
    for _ in range(20):
        last = subprocess.run(
            ["curl", "-s", "-m", "5", "-w", "\n%{http_code}", f"http://localhost:8000{path}"],
            capture_output=True, text=True,
        )
        if last.returncode == 0:
            break
        time.sleep(0.25)
    assert last.returncode == 0, f"nothing answers on port 8000 (curl exit {last.returncode})"
    body, _, code = last.stdout.rpartition("\n")
    return int(code), body


def test_status_file():
    with open("/app/site/status.json") as f:
        data = json.load(f)
    assert data == {"status": "ok", "version": "2.7.1"}


def test_status_endpoint():
    code, body = curl("/status.json")
    assert code == 200
    assert json.loads(body) == {"status": "ok", "version": "2.7.1"}


def test_index_served():
    code, body = curl("/")
    assert code == 200
    assert "Welcome to the platform status page" in body
