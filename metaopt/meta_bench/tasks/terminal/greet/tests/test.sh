#!/bin/bash
# meta-bench verifier: plain shell checks, reward 1 when all hold.
mkdir -p /logs/verifier
ok=1
if [ "$(cat /app/out/hello.txt 2>/dev/null)" = "hello, world" ]; then echo "PASS: /app/out/hello.txt says hello, world"; else echo "FAIL: /app/out/hello.txt says hello, world"; ok=0; fi
echo $ok > /logs/verifier/reward.txt
