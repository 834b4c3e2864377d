#!/bin/bash
set -euo pipefail
cd /app/pricing
git checkout -q main
merge=$(git log --merges --format=%H -n 1 main)
git revert --no-edit -m 1 "$merge"
python3 -m unittest discover -s /app/pricing
git log --oneline --graph
