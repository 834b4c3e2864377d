import grp
import os
import pwd
import stat
import subprocess
import time
from pathlib import Path

TEAM = Path("/srv/analytics")
CONTENTS = {
    "reports/q1.csv": "region,revenue\nnorth,1200\nsouth,900\n",
    "reports/q2.csv": "region,revenue\nnorth,1350\nsouth,1010\n",
    "notebooks/churn.md": "# churn model, work in progress\n",
    "README": "shared team notes\n",
}
HANDED_OVER = ["reports", "reports/q1.csv", "reports/q2.csv", "notebooks", "notebooks/churn.md"]


def groups_of(user):
    return set(subprocess.run(["id", "-nG", user], capture_output=True, text=True, check=True).stdout.split())


def owner(path):
    st = os.stat(path)
    return pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def shadow(user):
    for line in Path("/etc/shadow").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return fields
    raise AssertionError(f"{user} is not in /etc/shadow")


def test_new_hires():
    for user in ["carol", "dave"]:
        pw = pwd.getpwnam(user)
        assert pw.pw_shell == "/bin/bash"
        assert pw.pw_dir == f"/home/{user}" and os.path.isdir(pw.pw_dir)
        assert owner(pw.pw_dir)[0] == user
        assert "analytics" in groups_of(user)


def test_erin_moved():
    assert {"analytics", "support"} <= groups_of("erin")


def test_bob_offboarded():
    pw = pwd.getpwnam("bob")
    assert pw.pw_shell == "/usr/sbin/nologin"
    assert os.path.isdir("/home/bob"), "bob's home directory must be kept"
    assert "analytics" not in groups_of("bob")
    assert "bob" not in grp.getgrnam("analytics").gr_mem
    fields = shadow("bob")
    assert fields[1].startswith("!") and len(fields[1]) > 2, "bob's password is not locked"
    today = int(time.time() // 86400)
    assert fields[7] != "" and int(fields[7]) <= today, "bob's account is not expired"


def test_team_directory():
    assert owner(TEAM) == ("root", "analytics")
    m = mode(TEAM)
    assert m & 0o777 == 0o770, oct(m)
    assert m & stat.S_ISGID, "new files must inherit the group (setgid)"


def test_bob_files_handed_over():
    for rel in HANDED_OVER:
        assert owner(TEAM / rel) == ("carol", "analytics"), f"{rel}: {owner(TEAM / rel)}"
    for rel, text in CONTENTS.items():
        assert (TEAM / rel).read_text() == text, f"{rel} changed"
    bob = pwd.getpwnam("bob").pw_uid
    left = [str(p) for p in TEAM.rglob("*") if p.stat().st_uid == bob]
    assert not left, f"still owned by bob: {left}"


def test_group_member_can_work_in_team_dir():
    out = subprocess.run(["su", "-s", "/bin/sh", "dave", "-c",
                          f"touch {TEAM}/probe && stat -c %G {TEAM}/probe && cat {TEAM}/reports/q1.csv"],
                         capture_output=True, text=True)
    try:
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0] == "analytics"
    finally:
        if (TEAM / "probe").exists():
            (TEAM / "probe").unlink()


def test_authorized_keys():
    for user in ["carol", "dave"]:
        ssh = Path(f"/home/{user}/.ssh")
        keys = ssh / "authorized_keys"
        assert ssh.is_dir(), f"{ssh} is missing"
        assert owner(ssh) == (user, user) and mode(ssh) == 0o700, (owner(ssh), oct(mode(ssh)))
        assert keys.is_file(), f"{keys} is missing"
        assert owner(keys)[0] == user and mode(keys) == 0o600, (owner(keys), oct(mode(keys)))
        assert keys.read_text() == Path(f"/app/onboarding/{user}.pub").read_text()
