#!/bin/bash
set -euo pipefail
snaprestore list
# The newest snapshot by creation time (the ids are not ordered).
latest=$(snaprestore list | tail -n +2 | sort -k2,2 | tail -n 1 | awk '{print $1}')
echo "latest snapshot: $latest"
# Rate-limited restore: about 17 s.
snaprestore restore "$latest" /srv/orders/orders.db
sqlite3 /srv/orders/orders.db "PRAGMA integrity_check;"
sqlite3 /srv/orders/orders.db \
    "SELECT id FROM orders WHERE status = 'refunded' AND placed_at >= '2025-03-16' ORDER BY id;" > /app/refunds.txt
wc -l /app/refunds.txt
