"""Fixed scorers. Pure functions of the verifier's output: nothing here runs in the sandbox.

TB1 (`pytest`): the pytest `short test summary info` section is parsed; the trial is resolved only
if every listed test passed. Harbor (`reward`): /logs/verifier/reward.json, else reward.txt; a
missing or unreadable reward is an error, not 0. In both, a verifier that could not fetch its own
dependencies (uv, pytest, a Python) is an infrastructure error, never a score.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

_SUMMARY = re.compile(r"=+\s*short test summary info\s*=+", re.IGNORECASE)
_RESULT = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(?:\[\d+\]\s+)?(\S+?):?(?:\s|$)")
_PASS = {"PASSED", "SKIPPED", "XFAIL"}

# Output a verifier prints when it could not download what it needs. Seen with TB1/TB2 test
# scripts on machines without internet: curl and apt fail to resolve hosts, uv cannot fetch
# packages or a Python interpreter.
INFRA_PATTERNS = [
    r"Could not resolve host",
    r"Temporary failure resolving",
    r"Failed to (download|fetch)",
    r"No interpreter found for Python",
    r"No download found for request",
    r"Network is unreachable",
    r"uvx?: command not found",
    r"dns error|failed to lookup address",
    r"Because .* was not found in the (package registry|provided package locations)",
    r"hint: Packages were unavailable because the network was disabled",
]
_INFRA = re.compile("|".join(f"(?:{p})" for p in INFRA_PATTERNS), re.IGNORECASE)


@dataclass
class Verdict:
    """A scored verifier run. status: passed | failed | error (never raised)."""

    score: float | None
    status: str
    tests: dict[str, str] = field(default_factory=dict)  # test id -> passed | failed
    failure_mode: str | None = None
    error: str | None = None
    rewards: dict[str, float] | None = None


def parse_pytest_summary(text: str) -> dict[str, str] | None:
    """Per-test results from pytest `-rA` output, or None when the summary section is missing."""
    parts = _SUMMARY.split(text)
    if len(parts) < 2:
        return None
    results: dict[str, str] = {}
    for line in parts[-1].splitlines():
        m = _RESULT.match(line.strip())
        if m:
            results[m.group(2)] = "passed" if m.group(1) in _PASS else "failed"
    return results


def infra_failure(output: str) -> str | None:
    """The first line of `output` showing a failed dependency download, or None."""
    for line in output.splitlines():
        if _INFRA.search(line):
            return line.strip()[:300]
    return None


def score_pytest(output: str) -> Verdict:
    """Terminal-Bench 1.x: resolved iff the parsed summary is non-empty and every test passed."""
    tests = parse_pytest_summary(output)
    if not tests:
        cause = infra_failure(output)
        if cause:
            return Verdict(None, "error", failure_mode="infra_error", error=f"verifier could not fetch its dependencies: {cause}")
        return Verdict(None, "error", tests or {}, failure_mode="parse_error",
                       error="verifier output has no pytest 'short test summary info' section")
    resolved = all(v == "passed" for v in tests.values())
    return Verdict(1.0 if resolved else 0.0, "passed" if resolved else "failed", tests,
                   failure_mode=None if resolved else "tests_failed")


def score_reward(reward_json: bytes | None, reward_txt: bytes | None, output: str) -> Verdict:
    """Harbor: reward.json (flat {name: number}) wins over reward.txt (one float)."""
    tests = parse_pytest_summary(output) or {}
    rewards: dict[str, float] | None = None
    warning = None
    try:
        if reward_json is not None:
            data = json.loads(reward_json)
            if not isinstance(data, dict) or not data:
                raise ValueError("reward.json must be a non-empty object of numbers")
            rewards = {str(k): _finite(v) for k, v in data.items()}
            if reward_txt is not None:
                warning = "both reward.json and reward.txt exist; used reward.json"
        elif reward_txt is not None:
            rewards = {"reward": _finite(reward_txt.decode().strip())}
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        return Verdict(None, "error", tests, failure_mode="reward_error", error=f"unreadable reward file: {e}")
    if rewards is None:
        cause = infra_failure(output)
        why = f"verifier could not fetch its dependencies: {cause}" if cause else "verifier wrote no reward.json or reward.txt"
        return Verdict(None, "error", tests, failure_mode="infra_error" if cause else "reward_missing", error=why)
    score = rewards["reward"] if "reward" in rewards else sum(rewards.values()) / len(rewards)
    if score < 1.0 and not tests:
        # No test ran: a test.sh that writes 0 when its own setup failed is not the agent's fault.
        cause = infra_failure(output)
        if cause:
            return Verdict(None, "error", tests, failure_mode="infra_error", rewards=rewards,
                           error=f"verifier could not fetch its dependencies: {cause}")
    status = "passed" if score >= 1.0 else "failed"
    return Verdict(score, status, tests, failure_mode=None if status == "passed" else "tests_failed",
                   error=warning, rewards=rewards)


def _finite(v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueError(f"reward {v!r} is not a number")
    x = float(v)
    if not math.isfinite(x):
        raise ValueError(f"reward {v!r} is not finite")
    return x
