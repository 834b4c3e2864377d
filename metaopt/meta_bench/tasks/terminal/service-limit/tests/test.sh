#!/bin/bash
# meta-bench verifier: plain shell checks, reward 1 when all hold.
mkdir -p /logs/verifier
ok=1
if [ "$(cat /app/out/limit.txt 2>/dev/null | tr -d '[:space:]')" = "37" ]; then echo "PASS: /app/out/limit.txt holds the limit of the FATAL line"; else echo "FAIL: /app/out/limit.txt holds the limit of the FATAL line"; ok=0; fi
echo $ok > /logs/verifier/reward.txt
