#!/bin/bash
set -euo pipefail
mkdir -p /app/out
jq '[.items[] | select(.qty < 5) | {sku, name, qty}] | sort_by(.qty, .sku)' \
  /app/inventory.json > /app/out/low_stock.json
python3 - <<'PY'
import json
from collections import defaultdict

items = json.load(open("/app/inventory.json"))["items"]
totals = defaultdict(float)
for item in items:
    for tag in item["tags"]:
        totals[tag] += item["qty"] * item["price"]
json.dump({tag: round(v, 2) for tag, v in sorted(totals.items())}, open("/app/out/value_by_tag.json", "w"), indent=2)
PY
cat /app/out/value_by_tag.json
