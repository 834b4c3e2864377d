#!/bin/bash
set -euo pipefail
{
  echo "region,total_revenue"
  awk -F, 'NR > 1 && NF >= 5 { rev[tolower($2)] += $4 * $5 }
           END { for (r in rev) printf "%s,%.2f\n", r, rev[r] }' /app/data/sales.csv \
    | sort -t, -k2,2 -g -r
} > /app/region_totals.csv
