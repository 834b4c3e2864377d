#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import urllib.request

base = "http://kv:8080/keys"
names = urllib.request.urlopen(base).read().decode().split()
total = sum(int(urllib.request.urlopen(f"{base}/{n}").read()) for n in names if n.startswith("ledger/"))
urllib.request.urlopen(urllib.request.Request(f"{base}/ledger-total", data=str(total).encode(), method="PUT"))
with open("/app/total.txt", "w") as f:
    f.write(f"{total}\n")
print(total)
PY
