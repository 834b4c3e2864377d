import subprocess

REPO = "/app/pricing"


def git(*args, check=True):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=check)


def test_on_main_and_clean():
    assert git("rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "main"
    assert git("status", "--porcelain").stdout == ""


def test_unit_tests_pass():
    out = subprocess.run(["python3", "-m", "unittest", "discover", "-s", REPO],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]


def test_history_not_rewritten():
    # The tip of main before the agent started ("Document usage") must still be in main's history.
    old_tip = git("log", "--all", "--format=%H", "--grep=^Document usage$").stdout.split()
    assert old_tip, "the 'Document usage' commit is gone"
    assert git("merge-base", "--is-ancestor", old_tip[0], "main", check=False).returncode == 0
    assert git("rev-list", "--count", "main").stdout.strip() != "5", "no new commit on main"


def test_other_main_changes_kept():
    readme = git("show", "main:README.md").stdout
    assert "Price calculation helpers." in readme
    assert "from pricing import total" in readme
    assert "math.floor" not in git("show", "main:pricing.py").stdout
