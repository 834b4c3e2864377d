#!/bin/bash
set -euo pipefail
version=$(tr -d '\n' < /app/VERSION)
python3 -c 'import json, sys; json.dump({"status": "ok", "version": sys.argv[1]}, open("/app/site/status.json", "w"))' "$version"
cd /app/site
nohup setsid python3 -m http.server 8000 --bind 0.0.0.0 > /tmp/http.log 2>&1 < /dev/null &
for _ in $(seq 1 50); do
    curl -sf http://localhost:8000/status.json > /dev/null && break
    sleep 0.1
done
curl -s http://localhost:8000/status.json
