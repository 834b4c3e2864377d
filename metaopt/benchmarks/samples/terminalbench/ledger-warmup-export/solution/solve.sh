#!/bin/bash
set -euo pipefail
mkdir -p /app/reports
nohup setsid /app/ledger/start.sh > /var/log/ledgerd.log 2>&1 < /dev/null &
# Wait for the write-ahead log replay to finish (about 16 s).
for _ in $(seq 1 120); do
    curl -sf http://127.0.0.1:9400/healthz > /dev/null && break
    sleep 0.5
done
curl -sf http://127.0.0.1:9400/v1/balances > /tmp/balances.json
python3 - <<'PY'
import json
data = json.load(open("/tmp/balances.json"))
with open("/app/reports/balances.csv", "w") as f:
    f.write("account,balance_cents\n")
    for account in sorted(data["balances"]):
        f.write(f"{account},{data['balances'][account]}\n")
with open("/app/reports/HEAD", "w") as f:
    f.write(data["head"] + "\n")
PY
cat /app/reports/balances.csv /app/reports/HEAD
