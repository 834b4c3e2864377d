"""A model-written diagnosis of one failure cluster, every claim citing span ids of the cluster.

    diagnose_cluster(store, cluster, model) -> {model, summary, claims: [{text, spans}], dropped}

The model sees the cluster's signature and counts and, for a few example trials, the spans it may
cite (agent, tool calls, failing chats: id, name, status, message, exit code) with each tool call's
arguments and output, clipped. It answers one JSON object. A claim is kept only when it cites at
least one span and every span it cites is a span of the cluster's trials in the store (checked
there, not taken from the prompt); the others are dropped and counted. A model that fails or
answers no JSON gives a diagnosis with no claims and a summary saying why: never an exception.
"""

from __future__ import annotations

import json
import re
from typing import Any

from metaopt.core.errors import MetaoptError
from metaopt.task_agent.messages import Message, ModelSettings
from metaopt.task_agent.models import Model, get_model
from metaopt.traces import diagnose as dg
from metaopt.traces.queries import show_trial
from metaopt.traces.store import Store

EXAMPLE_TRIALS = 3
CLIP = 300
SYSTEM = ("You diagnose why an AI agent failed. You get a cluster of failing trials that share one failure "
          "signature, and the spans (steps) of a few of them. Answer with ONE JSON object and nothing else: "
          '{"summary": "one sentence: the likely root cause", "claims": [{"text": "one factual claim about what '
          'happened", "spans": ["span id", ...]}]}. Every claim must cite the span ids (16 hex characters, as '
          "listed) that show it; claims without a listed span id are discarded. At most 5 claims.")


def _clip(v: Any, n: int = CLIP) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= n else text[:n] + f"...[{len(text) - n} more]"


def prompt(store: Store, cluster: dict[str, Any]) -> str:
    """The user message: the cluster and the evidence of its first example trials."""
    trials = [e["trial_id"] for e in cluster["examples"][:EXAMPLE_TRIALS]]
    lines = [f"Cluster {cluster['cluster_id']}: {cluster['label']}",
             f"{cluster['size']} failing trial(s); tasks: "
             + ", ".join(f"{t} x{n}" for t, n in list(cluster["tasks"].items())[:10])
             + "; candidates/runs: " + ", ".join(f"{c.rsplit('/', 1)[-1]} x{n}" for c, n in cluster["candidates"].items()),
             ""]
    for tid in trials:
        lines.append(f"Trial {tid}:")
        try:
            transcript = show_trial(store, tid)["transcript"]
        except KeyError:
            transcript = []
        calls = {e["span_id"]: e for e in transcript if e["type"] == "tool"}
        for s in dg.evidence_spans(store, [tid]):
            extra = [f"status {s['status_code']}"] + [f"{k} {s[k]}" for k in ("message", "exit_code", "outcome") if s[k]]
            lines.append(f"- span {s['span_id']} {s['name']} ({', '.join(extra)})")
            call = calls.get(s["span_id"])
            if call:
                lines.append(f"    arguments: {_clip(call['arguments'])}")
                lines.append(f"    output: {_clip(call['result'] or '')}")
        lines.append("")
    return "\n".join(lines)


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (a fenced block or bare), None when there is none."""
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[m.start():])
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def validate(store: Store, cluster: dict[str, Any], answer: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """(kept claims, number dropped): a claim is kept when it has text and cites only spans of the
    cluster's trials, at least one."""
    raw: list[Any] = answer["claims"] if isinstance(answer.get("claims"), list) else []
    cited = sorted({s for c in raw if isinstance(c, dict) and isinstance(c.get("spans"), list)
                    for s in c["spans"] if isinstance(s, str)})
    known = dg.cluster_spans(store, cluster["trial_ids"], cited)
    kept = []
    for c in raw:
        spans = c.get("spans") if isinstance(c, dict) else None
        text = c.get("text") if isinstance(c, dict) else None
        if (isinstance(text, str) and text.strip() and isinstance(spans, list) and spans
                and all(isinstance(s, str) and s in known for s in spans)):
            kept.append({"text": text.strip(), "spans": list(dict.fromkeys(spans))})
    return kept, len(raw) - len(kept)


def diagnose_cluster(store: Store, cluster: dict[str, Any], model: Model | str,
                     max_tokens: int = 1024) -> dict[str, Any]:
    """The cluster's diagnosis by `model` (a Model or a registered name). Never raises for a model
    failure or a bad answer: the summary says what went wrong and no claim is kept."""
    m = get_model(model) if isinstance(model, str) else model
    name = getattr(m, "name", str(model))
    try:
        resp = m.generate([Message.system(SYSTEM), Message.user(prompt(store, cluster))], [],
                          ModelSettings(model=name, max_tokens=max_tokens, temperature=0))
        text = resp.message.text
    except MetaoptError as e:
        return {"model": name, "summary": f"the model failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                "claims": [], "dropped": 0}
    answer = _json_object(text)
    if answer is None:
        return {"model": name, "summary": "the model answered no JSON object", "claims": [], "dropped": 0}
    claims, dropped = validate(store, cluster, answer)
    summary = answer.get("summary")
    return {"model": name, "summary": summary.strip() if isinstance(summary, str) else "", "claims": claims,
            "dropped": dropped}


def diagnose(store: Store, ref: str, model: str | None = None, save: bool = True) -> dict[str, Any]:
    """`metaopt diagnose`: the clusters of experiment or run `ref`, each diagnosed by `model` when
    given (else the diagnosis stored earlier for the same cluster, if any), stored under `ref`
    when `save`. Returns {scope, kind, failing, clusters}."""
    experiment_id, run_id, _ = dg.scope_of(store, ref)
    found: list[dict[str, Any]] = dg.clusters(store, experiment_id, run_id)
    failing = sum(len(c["trial_ids"]) for c in found)
    if model is None:
        found = dg.with_diagnoses(store, ref, found)
    else:
        m = get_model(model)
        found = [c | {"diagnosis": diagnose_cluster(store, c, m)} for c in found]
    if save:
        dg.save(store, ref, found)
    return {"scope": ref, "kind": "experiment" if experiment_id else "run",
            "failing": failing, "clusters": found}
