import subprocess

REPO = "/app/webshop"
CHANGELOG = """# Changelog

## 2.4.0
- Fix XSS in comment rendering
- Fix off-by-one in page count

## 2.3.0
- Add gift cards
"""


def git(*args, check=True):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=check).stdout


def sha_of(subject, ref="--all"):
    out = git("log", ref, "--format=%H", f"--grep=^{subject}$").split()
    assert out, f"no commit '{subject}'"
    return out


def test_main_checked_out_and_clean():
    assert git("rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git("status", "--porcelain") == ""


def test_release_branch_commits():
    assert git("rev-parse", "--verify", "-q", "refs/heads/release/2.4", check=False).strip(), "no branch release/2.4"
    subjects = git("log", "--reverse", "--format=%s", "v2.3.0..release/2.4").splitlines()
    assert subjects == ["Add README", "Fix XSS in comment rendering", "Fix off-by-one in page count",
                        "Release 2.4.0"], subjects


def test_fixes_cherry_picked_with_x():
    for subject in ["Fix XSS in comment rendering", "Fix off-by-one in page count"]:
        original = sha_of(subject, "develop")[0]
        body = git("log", "release/2.4", "-1", "--format=%B", f"--grep=^{subject}$")
        assert f"(cherry picked from commit {original})" in body, f"'{subject}' was not cherry-picked with -x"


def test_release_commit_content():
    assert git("log", "-1", "--format=%s", "release/2.4").strip() == "Release 2.4.0"
    changed = sorted(git("diff-tree", "--no-commit-id", "--name-only", "-r", "release/2.4").split())
    assert changed == ["CHANGELOG.md", "VERSION"]
    assert git("show", "release/2.4:VERSION") == "2.4.0\n"
    assert git("show", "release/2.4:CHANGELOG.md") == CHANGELOG


def test_annotated_tag():
    assert git("cat-file", "-t", "v2.4.0", check=False).strip() == "tag", "v2.4.0 is missing or not annotated"
    assert git("rev-parse", "v2.4.0^{commit}") == git("rev-parse", "release/2.4")
    assert git("tag", "-l", "--format=%(contents:subject)", "v2.4.0").strip() == "Release 2.4.0"


def test_merged_into_main_without_fast_forward():
    parents = git("log", "-1", "--format=%P", "main").split()
    assert len(parents) == 2, "main's tip is not a merge commit"
    assert parents[0] == sha_of("Add README", "main")[0]
    assert parents[1] == git("rev-parse", "release/2.4").strip()
    assert git("show", "main:VERSION") == "2.4.0\n"
    assert "html.escape" in git("show", "main:render.py")
    assert "-(-total // per_page)" in git("show", "main:pagination.py")


def test_dark_mode_not_released():
    files = git("ls-tree", "-r", "--name-only", "main").split()
    assert "theme.py" not in files and "settings.py" not in files
    assert "dark mode" not in git("log", "--format=%s", "main").lower()


def test_develop_untouched():
    assert git("log", "-1", "--format=%s", "develop").strip() == "Enable dark mode by default"
    assert git("rev-list", "--count", "develop").strip() == "5"
