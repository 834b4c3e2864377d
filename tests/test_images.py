"""The image map and Dockerfile FROM rewriting: pure functions, no Docker daemon needed."""

from __future__ import annotations

import io
import tarfile

import pytest

from metaopt.core.errors import ImageNotFound
from metaopt.sandbox.images import ImageMap, context_digest, context_files, context_tar, rewrite_from_lines

LOCAL = {"metaopt-base:latest": "sha256:base", "local/tool:1": "sha256:tool"}


def local_id(ref: str) -> str | None:
    return LOCAL.get(ref)


def test_default_map_covers_terminal_bench_and_common_bases():
    m = ImageMap.default()
    for ref in ("ghcr.io/laude-institute/t-bench/python-3-13:20250620", "python:3.11-slim",
                "debian:bookworm", "ubuntu:24.04", "python", "docker.io/library/python:3.12"):
        assert m.lookup(ref) == "metaopt-base:latest", ref
    assert m.lookup("ghcr.io/someone/else:1") is None


def test_user_entries_win_and_come_first(tmp_path):
    f = tmp_path / "map.yaml"
    f.write_text('"python:*": my-python:3\n"ghcr.io/acme/*": acme-base:latest\n')
    m = ImageMap.load(f)
    assert m.lookup("python:3.11") == "my-python:3"
    assert m.lookup("ghcr.io/acme/x:1") == "acme-base:latest"
    assert m.lookup("debian:12") == "metaopt-base:latest"
    assert m.items()[0] == ("python:*", "my-python:3")
    assert [p for p, _ in m].count("python:*") == 1
    assert ImageMap.load(None).items() == ImageMap.default().items()


def test_exact_entry_before_glob_wins():
    m = ImageMap([("python:3.11", "py311:latest"), ("python:*", "pyany:latest")])
    assert m.lookup("python:3.11") == "py311:latest"
    assert m.lookup("python:3.12") == "pyany:latest"
    assert len(m) == 2


@pytest.mark.parametrize(
    "text, bad",
    [
        ("- just\n- a list\n", "mapping"),
        ('"python:*": [a, b]\n', "python:*"),
        ('"python:*": "two words"\n', "python:*"),
        ("python:*: x: y: [\n", "not valid YAML"),
        ('"": x:1\n', "bad pattern"),
    ],
)
def test_malformed_map_names_file_and_entry(tmp_path, text, bad):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ValueError) as e:
        ImageMap.load(f)
    assert str(f) in str(e.value) and bad in str(e.value)


def test_rewrite_keeps_present_maps_absent_and_skips_stages():
    text = (
        "# syntax comment\n"
        "ARG BASE=python:3.11\n"
        "FROM --platform=linux/amd64 ${BASE} AS build\n"
        "RUN make\n"
        "FROM local/tool:1\n"
        "FROM build AS final\n"
        "from scratch\n"
        "COPY --from=build /x /x\n"
    )
    m = ImageMap({"python:*": "metaopt-base:latest"})
    out, bases = rewrite_from_lines(text, m, local_id)
    lines = out.splitlines()
    assert lines[2] == "FROM --platform=linux/amd64 metaopt-base:latest AS build"
    assert lines[4] == "FROM local/tool:1"
    assert lines[5] == "FROM build AS final"
    assert lines[6] == "from scratch"
    assert bases == [("${BASE}", "metaopt-base:latest", "sha256:base"),
                     ("local/tool:1", "local/tool:1", "sha256:tool")]
    assert out.endswith("COPY --from=build /x /x\n")


def test_rewrite_leaves_a_fully_local_dockerfile_untouched():
    text = "FROM metaopt-base:latest\r\nRUN true\r\n"
    assert rewrite_from_lines(text, ImageMap(), local_id)[0] == text


def test_unmapped_absent_image_says_how_to_map_it():
    with pytest.raises(ImageNotFound) as e:
        rewrite_from_lines("FROM ghcr.io/x/y:1\n", ImageMap(), local_id)
    assert "ghcr.io/x/y:1" in str(e.value) and "--image-map FILE" in str(e.value)


def test_mapped_target_must_be_present_too():
    with pytest.raises(ImageNotFound, match="metaopt sandbox base"):
        rewrite_from_lines("FROM python:3\n", ImageMap({"python:*": "absent:1"}), local_id)


def test_context_digest_tracks_content_mode_and_dockerignore(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.sh").write_text("echo b")
    (tmp_path / ".dockerignore").write_text("# comment\nignored/\n")
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "big.bin").write_bytes(b"\0" * 10)

    def digest() -> str:
        return context_digest(tmp_path, context_files(tmp_path, "Dockerfile"), ["FROM x\n"])

    files = context_files(tmp_path, "Dockerfile")
    assert "sub/b.sh" in files and not any(f.startswith("ignored") for f in files)
    d0 = digest()
    (tmp_path / "ignored" / "big.bin").write_bytes(b"\1")
    assert digest() == d0
    (tmp_path / "sub" / "b.sh").chmod(0o755)
    d1 = digest()
    assert d1 != d0
    (tmp_path / "a.txt").write_text("A")
    assert digest() != d1
    other = context_digest(tmp_path, files, ["FROM y\n"])
    assert other != context_digest(tmp_path, files, ["FROM x\n"])


def test_context_tar_uses_the_rewritten_dockerfile(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM python:3\n")
    (tmp_path / "app.py").write_text("print(1)")
    buf = context_tar(tmp_path, context_files(tmp_path, "Dockerfile"), "Dockerfile",
                      "FROM metaopt-base:latest\n")
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tar:
        names = tar.getnames()
        assert sorted(names) == ["Dockerfile", "app.py"]
        assert tar.extractfile("Dockerfile").read() == b"FROM metaopt-base:latest\n"
        assert tar.getmember("app.py").uid == 0
    assert (tmp_path / "Dockerfile").read_text() == "FROM python:3\n"
