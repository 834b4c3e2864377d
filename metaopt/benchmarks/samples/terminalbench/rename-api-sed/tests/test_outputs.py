import re
import subprocess
from pathlib import Path

ROOT = Path("/app/service")

API = '''from .cache import getUserDataCache


def get_user_data(user_id):
    """Return the user record for user_id."""
    cached = getUserDataCache.get(user_id)
    if cached is not None:
        return cached
    record = {"id": user_id, "name": f"user{user_id}"}
    getUserDataCache[user_id] = record
    return record


def prefetch_getUserData(ids):
    return [get_user_data(i) for i in ids]
'''
INIT = '''from .api import get_user_data, prefetch_getUserData

__all__ = ["get_user_data", "prefetch_getUserData"]
'''
ENDPOINTS = """users:
  base_url: https://internal.example.com/users
  timeout: 5
billing:
  base_url: https://internal.example.com:8443/billing
metrics:
  base_url: http://metrics.example.com/push
docs: http://internal.example.community/wiki
"""


def test_no_old_name_in_python():
    for path in ROOT.rglob("*.py"):
        if "vendor" in path.parts:
            continue
        assert not re.search(r"\bgetUserData\b", path.read_text()), f"{path} still uses getUserData"


def test_api_module_exact():
    assert (ROOT / "users/api.py").read_text() == API


def test_package_init_exact():
    assert (ROOT / "users/__init__.py").read_text() == INIT
    assert (ROOT / "users/cache.py").read_text() == "getUserDataCache = {}\n"


def test_yaml_urls():
    assert (ROOT / "config/endpoints.yaml").read_text() == ENDPOINTS


def test_vendor_and_docs_untouched():
    assert "def getUserData(session, uid):" in (ROOT / "vendor/legacy/client.py").read_text()
    assert (ROOT / "vendor/legacy/settings.yaml").read_text() == "endpoint: http://internal.example.com/legacy\n"
    assert (ROOT / "README.md").read_text() == "Call getUserData(user_id) to fetch a user from http://internal.example.com.\n"


def test_main_runs():
    out = subprocess.run(["python3", str(ROOT / "main.py")], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["user7", "3"]
