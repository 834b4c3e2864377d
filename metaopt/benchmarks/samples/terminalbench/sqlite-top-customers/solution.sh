#!/bin/bash
set -euo pipefail
sqlite3 -separator '|' /app/shop.db "
  SELECT c.name, printf('%.2f', SUM(o.amount_cents) / 100.0)
  FROM orders o JOIN customers c ON c.id = o.customer_id
  WHERE o.status = 'paid' AND o.ordered_at >= '2024-01-01' AND o.ordered_at < '2025-01-01'
  GROUP BY c.id
  ORDER BY SUM(o.amount_cents) DESC, c.name
  LIMIT 3;" > /app/top_customers.txt
cat /app/top_customers.txt
