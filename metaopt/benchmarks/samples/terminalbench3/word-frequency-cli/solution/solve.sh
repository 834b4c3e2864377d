#!/bin/bash
cat > /app/wordfreq.py <<'PY'
import argparse
import collections
import re
import sys

parser = argparse.ArgumentParser()
parser.add_argument("-n", type=int, default=3)
args = parser.parse_args()
counts = collections.Counter(re.findall(r"[a-z']+", sys.stdin.read().lower()))
for word, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: args.n]:
    print(count, word)
PY
