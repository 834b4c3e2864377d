#!/bin/bash
# meta-bench verifier: plain shell checks, reward 1 when all hold.
mkdir -p /logs/verifier
ok=1
if grep -qx "port=8080" /app/conf/app.ini; then echo "PASS: port is 8080"; else echo "FAIL: port is 8080"; ok=0; fi
if grep -qx "admin_port=9090" /app/conf/app.ini; then echo "PASS: admin_port is still 9090"; else echo "FAIL: admin_port is still 9090"; ok=0; fi
if grep -qx "workers=4" /app/conf/app.ini; then echo "PASS: workers is still 4"; else echo "FAIL: workers is still 4"; ok=0; fi
echo $ok > /logs/verifier/reward.txt
