#!/bin/bash
# meta-bench verifier: plain shell checks, reward 1 when all hold.
mkdir -p /logs/verifier
ok=1
if [ "$(cat /app/out/count.txt 2>/dev/null | tr -d '[:space:]')" = "412" ]; then echo "PASS: /app/out/count.txt holds the indexed record count"; else echo "FAIL: /app/out/count.txt holds the indexed record count"; ok=0; fi
echo $ok > /logs/verifier/reward.txt
