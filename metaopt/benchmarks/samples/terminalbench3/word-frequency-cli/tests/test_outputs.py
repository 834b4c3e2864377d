"""Runs the agent's /app/wordfreq.py (its only artifact) on inputs it never saw."""

import collections
import re
import subprocess

import pytest

TEXTS = [
    "It's a truth, it's a lie; IT'S a TRUTH.\nlie lie",
    "zeta alpha beta alpha beta gamma",
    "one\n\ntwo two\nthree three three\nfour four four four",
    "",
    "123 456 !!! ...",
]


def expected(text: str, n: int) -> str:
    counts = collections.Counter(re.findall(r"[a-z']+", text.lower()))
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return "".join(f"{c} {w}\n" for w, c in top)


def run(text: str, *args: str) -> str:
    r = subprocess.run(["python3", "/app/wordfreq.py", *args], input=text, capture_output=True, text=True,
                       timeout=30, user="nobody")
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("text", TEXTS)
def test_default_three(text):
    assert run(text) == expected(text, 3)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_n_option(n):
    assert run(TEXTS[2], "-n", str(n)) == expected(TEXTS[2], n)
