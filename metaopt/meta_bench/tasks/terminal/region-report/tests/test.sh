#!/bin/bash
# meta-bench verifier: plain shell checks, reward 1 when all hold.
mkdir -p /logs/verifier
ok=1
if [ "$(head -n 1 /app/out/report.csv 2>/dev/null)" = "region,total" ]; then echo "PASS: report.csv starts with the header row region,total (house CSV convention)"; else echo "FAIL: report.csv starts with the header row region,total (house CSV convention)"; ok=0; fi
if [ "$(tail -n +2 /app/out/report.csv 2>/dev/null | tr '\n' ' ')" = "east,50 north,150 south,100 west,200 " ]; then echo "PASS: report.csv rows are the per-region totals sorted by region"; else echo "FAIL: report.csv rows are the per-region totals sorted by region"; ok=0; fi
echo $ok > /logs/verifier/reward.txt
