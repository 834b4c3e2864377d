import grp
import os
import pwd
import stat
import subprocess

BASE = "/app/deploy"


def owner(path):
    st = os.stat(path)
    return pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_api_key():
    path = f"{BASE}/secrets/api.key"
    assert owner(path) == ("deploy", "deploy")
    assert mode(path) == 0o600, oct(mode(path))
    with open(path) as f:
        assert f.read() == "sk_live_4f9a1c2e7b3d8a6f0e5c9b2d\n"


def test_secrets_dir():
    path = f"{BASE}/secrets"
    assert owner(path) == ("deploy", "deploy")
    assert mode(path) == 0o700, oct(mode(path))


def test_other_users_cannot_read_key():
    out = subprocess.run(["su", "-s", "/bin/sh", "alice", "-c", f"cat {BASE}/secrets/api.key"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "sk_live" not in out.stdout


def test_release_script():
    path = f"{BASE}/bin/release.sh"
    m = mode(path)
    assert owner(path)[0] == "root"
    assert m & 0o111 == 0o111, f"not executable by everyone: {oct(m)}"
    assert m & 0o022 == 0, f"writable by group or others: {oct(m)}"
    out = subprocess.run(["su", "-s", "/bin/sh", "alice", "-c", f"{path} v1.2"], capture_output=True, text=True)
    assert out.stdout.strip() == "releasing v1.2"


def test_shared_dir():
    path = f"{BASE}/shared"
    m = mode(path)
    assert owner(path)[1] == "devs"
    assert m & stat.S_ISGID, "files created inside must inherit the group (setgid)"
    assert m & 0o070 == 0o070, f"group must have rwx: {oct(m)}"
    assert m & 0o002 == 0, f"others must not write: {oct(m)}"
    assert m & 0o005 == 0o005, f"others must read and enter: {oct(m)}"


def test_group_inherited_by_new_files():
    out = subprocess.run(["su", "-s", "/bin/sh", "alice", "-c", f"touch {BASE}/shared/probe && stat -c %G {BASE}/shared/probe"],
                         capture_output=True, text=True)
    try:
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "devs"
    finally:
        if os.path.exists(f"{BASE}/shared/probe"):
            os.remove(f"{BASE}/shared/probe")


def test_old_key_removed():
    assert not os.path.exists(f"{BASE}/secrets/old.key")
