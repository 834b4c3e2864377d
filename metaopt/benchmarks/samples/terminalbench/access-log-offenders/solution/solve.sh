#!/bin/bash
set -euo pipefail
mkdir -p /app/report
awk '$9 >= 400 && $9 <= 599 { print $1 }' /app/logs/access.log \
  | sort | uniq -c | awk '{ print $1, $2 }' \
  | sort -k1,1nr -k2,2 | head -n 5 > /app/report/top_offenders.txt
awk '$9 == 404' /app/logs/access.log | wc -l | tr -d ' ' > /app/report/not_found.txt
cat /app/report/top_offenders.txt /app/report/not_found.txt
