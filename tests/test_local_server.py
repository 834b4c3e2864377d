"""The embedded llama.cpp server behind local/ models, with the real 0.5B model (pulled on first
use if setup.sh has not): started once and shared by threads, on 127.0.0.1, stopped at exit and
on Ctrl-C / SIGTERM while a request is in flight; settings and bad input."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from metaopt.core.errors import ModelConfigError, UnknownProvider
from metaopt.task_agent.messages import Message, ModelSettings
from metaopt.task_agent.models import allow_model_requests, get_model
from metaopt.task_agent.models.local_server import LocalServer, LocalSettings, running_servers
from metaopt.task_agent.models.local_weights import resolve

REPO = Path(__file__).resolve().parents[1]
MODEL = "local/qwen2.5-coder-0.5b"
pytestmark = pytest.mark.timeout(300)


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.usefixtures("local_model")
def test_one_server_started_once_and_shared_by_concurrent_episodes():
    models, barrier = [], threading.Barrier(6)

    def build():
        barrier.wait()
        models.append(get_model(MODEL))

    threads = [threading.Thread(target=build) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    servers = {id(m.server) for m in models}
    server = models[0].server
    same = [s for s in running_servers() if (s.path, s.settings, s.alias) == (server.path, server.settings, server.alias)]
    assert len(servers) == 1 and same == [server]
    assert server.address.startswith("http://127.0.0.1:") and port_open(server.port)

    replies = {}

    def ask(i: int):
        with allow_model_requests():  # process-wide: both threads are inside it
            replies[i] = models[i].generate([Message.user(f"Say the number {i}.")], [],
                                            ModelSettings(model=MODEL, temperature=0, max_tokens=12))

    with allow_model_requests():
        askers = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        for t in askers:
            t.start()
        for t in askers:
            t.join()
    for r in replies.values():
        assert r.model == "qwen2.5-coder-0.5b" and r.provider == "llama.cpp" and r.cost_usd == 0.0
        assert r.usage.input_tokens > 0 and 0 < r.usage.output_tokens <= 12
        assert r.server_port == server.port
    assert len(replies) == 2


@pytest.mark.usefixtures("local_model")
def test_stop_closes_the_port():
    server = LocalServer(resolve("qwen2.5-coder-0.5b"), LocalSettings(ctx=1024, parallel=1),
                         alias="lifecycle", pinned=True)
    assert server.load_s > 0 and port_open(server.port)
    server.stop()
    assert not server.running and not port_open(server.port)


SCRIPT = textwrap.dedent('''
    import atexit, signal, socket, sys

    def port_open(port):
        with socket.socket() as s:
            s.settimeout(2)
            return s.connect_ex(("127.0.0.1", port)) == 0

    state = {}

    @atexit.register
    def last():  # registered before the server's own handler, so it runs after it
        from metaopt.task_agent.models.local_server import running_servers
        print(f"at-exit running={len(running_servers())} port_open={port_open(state['port'])}", flush=True)

    def on_term(signum, frame):  # what the metaopt CLI does with SIGTERM
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    from metaopt.task_agent.messages import Message, ModelSettings
    from metaopt.task_agent.models import allow_model_requests, get_model
    m = get_model("local/qwen2.5-coder-0.5b")
    state["port"] = m.server.port
    print(f"port {m.server.port} open={port_open(m.server.port)}", flush=True)
    if sys.argv[1] == "busy":
        print("generating", flush=True)
        with allow_model_requests():
            m.generate([Message.user("Write a very long story about a dragon.")], [],
                       ModelSettings(model="local/qwen2.5-coder-0.5b", max_tokens=4000, temperature=0))
''')


@pytest.mark.usefixtures("local_model")
@pytest.mark.parametrize("how", ["exit", "sigint", "sigterm"])
def test_server_stops_at_exit_and_on_ctrl_c_or_sigterm_mid_request(tmp_path, how):
    script = tmp_path / "lifecycle.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), "exit" if how == "exit" else "busy"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "METAOPT_LOCAL_PARALLEL": "1"})
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.strip())
        if line.startswith("generating"):
            threading.Timer(1.5, proc.send_signal, [signal.SIGINT if how == "sigint" else signal.SIGTERM]).start()
    rc = proc.wait(timeout=60)
    port_line = next(x for x in lines if x.startswith("port "))
    port = int(port_line.split()[1])
    assert port_line.endswith("open=True")
    assert "at-exit running=0 port_open=False" in lines, lines  # stopped by its atexit handler
    # an uncaught KeyboardInterrupt ends Python by SIGINT after its cleanup; anything else is a crash
    assert rc == (0 if how == "exit" else -signal.SIGINT), lines
    assert any("KeyboardInterrupt" in x for x in lines) == (how != "exit")
    assert not port_open(port)


def test_settings_from_the_environment_and_bad_values(monkeypatch):
    monkeypatch.setenv("METAOPT_LOCAL_CTX", "4096")
    monkeypatch.setenv("METAOPT_LOCAL_TEMPERATURE", "0")
    monkeypatch.setenv("METAOPT_LOCAL_VERBOSE", "yes")
    s = LocalSettings.from_env(parallel=3)
    assert (s.ctx, s.temperature, s.verbose, s.parallel) == (4096, 0.0, True, 3)
    assert s.threads >= 1 and s.template_text(pinned=False) is None
    assert "fenced json block" in s.template_text(pinned=True)
    monkeypatch.setenv("METAOPT_LOCAL_CTX", "lots")
    with pytest.raises(ModelConfigError, match="METAOPT_LOCAL_CTX: .*'lots'"):
        LocalSettings.from_env()
    monkeypatch.delenv("METAOPT_LOCAL_CTX")
    monkeypatch.setenv("METAOPT_LOCAL_TEMPLATE", "/no/such/template.jinja")
    with pytest.raises(ModelConfigError, match="cannot read chat template /no/such/template.jinja"):
        LocalSettings.from_env().template_text(pinned=True)


@pytest.mark.usefixtures("local_model")
def test_model_names(tmp_path):
    with pytest.raises(ModelConfigError, match="unknown local model 'qwen9'"):
        get_model("local/qwen9")
    with pytest.raises(ModelConfigError, match=f"{tmp_path}/none.gguf does not exist"):
        get_model(f"local:{tmp_path}/none.gguf")
    with pytest.raises(ModelConfigError, match="--base-url does not apply"):
        get_model(MODEL, base_url="http://127.0.0.1:1/v1")
    with pytest.raises(UnknownProvider):
        get_model("local")
    gguf = resolve("qwen2.5-coder-0.5b")
    own = get_model(f"local:{gguf}", context={"local_settings": LocalSettings(ctx=1024, parallel=1)})
    assert own.name == f"local:{gguf}" and own.model == gguf.stem and not own.pinned
    own.server.stop()
