"""Local model figures: load time, prompt and generation tokens/s, seconds per agent turn.

    python -m perf.local_model [--models qwen2.5-coder-0.5b,qwen2.5-coder-1.5b] [--task hello-greetings]
                               [--turns 6] [--repeats 3] [--json]

For each pinned model (pulled first if missing): the sha256 check of the cached file, the time
from starting the embedded llama.cpp server to its first answered request, then the server's own
timings (llama.cpp's `timings` in the reply) for a ~1,500-token prompt with the prompt cache off
and for 128 generated tokens (ignore_eos), median of --repeats; how many of five one-step
requests with the baseline harness's prompt and tools get a well-formed tool call (and how many
llama.cpp parsed itself, not the text fallback); then one real episode of the
baseline harness (temperature 0, --turns turns at most) on a terminalbench-sample task in Docker,
traced into a scratch store: seconds per turn (agent time / turns) and per chat call. The load
average before and after is printed with the figures: on a shared 2-core machine it decides them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

PROMPT = ("Here is a log excerpt from a build server. Summarise what failed and why.\n"
          + "".join(f"[{i:04d}] step {i % 17}: compiling module_{i % 23}.c ... ok (warnings: {i % 5})\n"
                    for i in range(60)))


def _post(base_url: str, body: dict) -> dict:
    req = urllib.request.Request(base_url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        return json.loads(r.read())


def speeds(base_url: str, repeats: int) -> dict:
    """Median prompt and generation tokens/s, from llama.cpp's own timings."""
    prompt, gen = [], []
    n_prompt = n_gen = 0
    for i in range(repeats):
        r = _post(base_url, {"messages": [{"role": "user", "content": f"({i}) {PROMPT}"}], "max_tokens": 1,
                             "temperature": 0, "cache_prompt": False})
        prompt.append(r["timings"]["prompt_per_second"])
        n_prompt = r["timings"]["prompt_n"]
        r = _post(base_url, {"messages": [{"role": "user", "content": "Count from 1 to 1000, one per line."}],
                             "max_tokens": 128, "temperature": 0, "ignore_eos": True})
        gen.append(r["timings"]["predicted_per_second"])
        n_gen = r["timings"]["predicted_n"]
    return {"prompt_tokens": n_prompt, "prompt_tok_s": statistics.median(prompt),
            "gen_tokens": n_gen, "gen_tok_s": statistics.median(gen)}


CALL_PROMPTS = ["Create the directory /app/out.", "Show the first 5 lines of /etc/passwd.",
                "Count the lines of /app/data.csv.", "Write 'ok' into /app/status.txt.",
                "Find every .py file under /app."]


def tool_calls(model_name: str) -> dict:
    """Five one-step requests with the baseline harness's prompt and tools (temperature 0): how
    many replies hold a well-formed call, and how many of those llama.cpp parsed itself."""
    from metaopt.task_agent.harness_io import load_harness, resolve_harness
    from metaopt.task_agent.messages import Message, ModelSettings
    from metaopt.task_agent.models import get_model

    h = load_harness(resolve_harness("baseline"))
    model = get_model(model_name)
    good = by_server = 0
    for prompt in CALL_PROMPTS:
        r = model.generate([Message.system(h.system_prompt("main")), Message.user(h.render_task(prompt))],
                           h.tool_specs("main"), ModelSettings(model=model_name, temperature=0, max_tokens=256))
        calls = r.message.tool_calls
        if calls and not any(c.arguments_error for c in calls):
            good += 1
            by_server += r.unparsed_output is None
    return {"well_formed": good, "by_server": by_server, "of": len(CALL_PROMPTS)}


def episode(model_name: str, task_id: str, turns: int, store_dir: Path) -> dict:
    """One real episode of the baseline harness (temperature 0, `turns` at most) in Docker."""
    from metaopt.benchmarks.registry import load_benchmark
    from metaopt.evaluation import run_eval
    from metaopt.evaluation.agents import HarnessAgent
    from metaopt.sandbox.docker import DockerBackend
    from metaopt.task_agent.harness_io import harness_from_data, load_harness, resolve_harness
    from metaopt.traces.store import Store
    from metaopt.traces.tracing import Tracing

    data = load_harness(resolve_harness("baseline")).model_dump(mode="json", exclude_unset=True)
    data["routing"]["limits"] = {**data["routing"].get("limits", {}), "max_turns": turns}
    data["model"] = {**data.get("model", {}), "temperature": 0.0, "max_tokens": 512}
    store = Store(store_dir / f"{model_name.replace('/', '_')}.duckdb")
    agent = HarnessAgent(harness_from_data(data), model_name)
    agent.tracing = Tracing.for_store(store)
    try:
        result = run_eval(load_benchmark("terminalbench-sample", None, [task_id]), agent,
                          benchmark="terminalbench-sample", backend=DockerBackend(), store=store, concurrency=1)
        [trial] = result.rows
        chats = store.rows("SELECT duration_ms, input_tokens, output_tokens FROM spans "
                           "WHERE trial_id = ? AND operation_name = 'chat'", [trial.trial_id])
    finally:
        agent.tracing.shutdown()
        store.close()
    n = max(1, len(chats))
    return {"task": task_id, "status": trial.status, "score": trial.score, "turns": len(chats),
            "agent_s": trial.agent_duration_s, "s_per_turn": (trial.agent_duration_s or 0) / n,
            "s_per_chat": statistics.mean(c["duration_ms"] for c in chats) / 1000 if chats else None,
            "input_tokens": sum(c["input_tokens"] or 0 for c in chats),
            "output_tokens": sum(c["output_tokens"] or 0 for c in chats),
            "outcome": (trial.agent_log or "").split(";")[0].removeprefix("outcome: ")}


def measure(model: str, task_id: str, turns: int, repeats: int, store_dir: Path) -> dict:
    from metaopt.task_agent.models.local import model_path
    from metaopt.task_agent.models.local_server import LocalSettings, shared_server

    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    path = model_path(model)  # pulls when missing; the sha256 check otherwise
    verify_s = time.monotonic() - t0
    settings = LocalSettings.from_env()
    server = shared_server(path, settings, alias=model, pinned=True)
    out = {"model": f"local/{model}", "threads": settings.threads, "verify_s": verify_s, "load_s": server.load_s,
           **speeds(server.base_url, repeats)}
    os.environ.setdefault("METAOPT_ALLOW_MODEL_REQUESTS", "1")  # this script exists to call the model
    out["tool_calls"] = tool_calls(f"local/{model}")
    out["episode"] = episode(f"local/{model}", task_id, turns, store_dir)
    server.stop()
    out["load_avg"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    ap.add_argument("--task", default="hello-greetings")
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="perf-local-") as tmp:
        for model in a.models.split(","):
            rows.append(measure(model.strip().removeprefix("local/"), a.task, a.turns, a.repeats, Path(tmp)))
            if not a.json:
                r, e = rows[-1], rows[-1]["episode"]
                print(f"{r['model']}: threads {r['threads']}, load avg {r['load_avg'][0]} -> {r['load_avg'][1]}\n"
                      f"  sha256 check {r['verify_s']:.1f} s, server start + model load {r['load_s']:.1f} s\n"
                      f"  prompt {r['prompt_tok_s']:.0f} tok/s ({r['prompt_tokens']} tokens), "
                      f"generation {r['gen_tok_s']:.1f} tok/s ({r['gen_tokens']} tokens), median of {a.repeats}\n"
                      f"  tool calls well-formed {r['tool_calls']['well_formed']}/{r['tool_calls']['of']} "
                      f"({r['tool_calls']['by_server']} parsed by llama.cpp, the rest from the text)\n"
                      f"  episode {e['task']}: {e['turns']} turns, {e['s_per_turn']:.1f} s/turn "
                      f"({e['s_per_chat']:.1f} s per chat call), {e['input_tokens']} in / {e['output_tokens']} out "
                      f"tokens, outcome {e['outcome']}, {e['status']} (score {e['score']})", flush=True)
    if a.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
