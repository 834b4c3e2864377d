import subprocess

REPO = "/app/notes-repo"
CHECKLIST = """# Release checklist

1. Freeze the release branch.
2. Run the full test suite on the release candidate.
3. Update CHANGELOG.md with the user-facing changes.
4. Tag the release: `git tag -s vX.Y.Z`.
5. Announce in #releases with a link to the changelog.
"""
# Subjects of the commits on main before the agent started, oldest first.
ORIGINAL_MAIN = ["Initial notes", "Add on-call guide", "Point README at docs", "Document shift handover"]
# main's tip when the task started (the repo is built with fixed dates, so the id is stable).
ORIGINAL_TIP = "41f714761a47a8c42202ff123d30c65a7a642af6"


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout


def test_on_main():
    assert git("rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


def test_checklist_commit_on_main():
    subjects = git("log", "--format=%s", "main").splitlines()
    assert "Add release checklist" in subjects


def test_checklist_content_in_head():
    assert git("show", "main:docs/release-checklist.md") == CHECKLIST


def test_later_commits_kept():
    subjects = git("log", "--format=%s", "main").splitlines()
    for subject in ORIGINAL_MAIN:
        assert subject in subjects, f"commit {subject!r} is no longer on main"
    assert git("show", "main:README.md").endswith("See docs/ for guides.\n")
    assert "Hand over open incidents" in git("show", "main:docs/oncall.md")


def test_history_not_rewritten():
    rc = subprocess.run(["git", "-C", REPO, "merge-base", "--is-ancestor", ORIGINAL_TIP, "main"]).returncode
    assert rc == 0, "main no longer contains its original tip"


def test_clean_worktree():
    assert git("status", "--porcelain") == ""
