"""sandbox.base_image and sandbox.base_wheels: the parts that need neither root, debootstrap nor a Docker daemon."""

from __future__ import annotations

import io
import subprocess
import zipfile

import pytest

from metaopt.sandbox import base_image as bi
from metaopt.sandbox import base_wheels as bw


def test_preflight_names_missing_debootstrap(monkeypatch):
    monkeypatch.setattr(bi.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="debootstrap not found"):
        bi.build_base_image(client=object())


def test_preflight_needs_root(monkeypatch):
    monkeypatch.setattr(bi.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(bi.os, "geteuid", lambda: 1000)
    with pytest.raises(RuntimeError, match="needs root"):
        bi.build_base_image(client=object())


def test_pip_download_failure_is_one_line(monkeypatch, tmp_path):
    class FailingPopen:
        returncode = 1

        def __init__(self, *a, **k):
            pass

        def communicate(self):
            return "", "Looking in indexes: x\nERROR: No matching distribution found for uv\n"

    monkeypatch.setattr(bw.subprocess, "Popen", FailingPopen)
    with pytest.raises(RuntimeError) as info:
        bw.download_wheels(tmp_path)
    msg = str(info.value)
    assert "\n" not in msg and "pip download" in msg and "No matching distribution" in msg


def test_uv_binaries_come_from_the_wheel_scripts(tmp_path):
    wheel = tmp_path / "uv-0.9.0-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("uv-0.9.0.data/scripts/uv", b"UV")
        zf.writestr("uv-0.9.0.data/scripts/uvx", b"UVX")
        zf.writestr("uv/__init__.py", b"")
    assert bw.uv_binaries(tmp_path) == {"uv": b"UV", "uvx": b"UVX"}


def test_dockerfile_sets_offline_environment():
    text = bi._dockerfile("sha256:" + "0" * 64, ["uv", "uvx"])
    assert text.startswith("FROM sha256:")
    for key, value in bi.IMAGE_ENV.items():
        assert f"{key}={value}" in text
    for dest in ("/usr/local/bin/uv", "/usr/local/bin/uvx", "/root/.local/bin/uv", "/root/.local/bin/uvx"):
        assert f" {dest}\n" in text
    assert "COPY env /root/.local/bin/env" in text
    assert "WORKDIR /app" in text
    assert 'metaopt.managed="true"' in text and 'metaopt.base="1"' in text


def test_env_script_puts_local_bin_on_path_once(tmp_path):
    env = tmp_path / "env"
    env.write_text(bi.UV_ENV_SCRIPT)
    cmd = f'. {env}; . {env}; printf %s "$PATH"'
    out = subprocess.run(["sh", "-c", cmd], env={"HOME": "/h", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout
    assert out == "/h/.local/bin:/usr/bin:/bin"


def test_missing_debs_are_dropped_and_retried(monkeypatch, tmp_path):
    calls = []

    class FakeProc:
        def __init__(self, cmd, **kwargs):
            calls.append(cmd)
            include = next(a for a in cmd if a.startswith("--include="))
            self.rc = 1 if "nosuchpkg" in include else 0
            text = "E: Couldn't find these debs: nosuchpkg\n" if self.rc else "I: Base system installed successfully.\n"
            self.stdout = io.StringIO(text)

        def wait(self):
            return self.rc

    monkeypatch.setattr(bi.subprocess, "Popen", FakeProc)
    lines: list[str] = []
    bi._debootstrap(tmp_path / "root", "bookworm", "http://m", ["bash", "nosuchpkg"], lines.append)
    assert len(calls) == 2 and "nosuchpkg" not in calls[1][2]
    assert any("lacks nosuchpkg" in ln for ln in lines)
