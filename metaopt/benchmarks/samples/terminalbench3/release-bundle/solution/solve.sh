#!/bin/bash
set -e
mkdir -p /app/dist
cd /app/src
tar -czf /app/dist/app-1.2.0.tar.gz app/__init__.py app/core.py --no-recursion app
cd /app/dist
sha256sum app-1.2.0.tar.gz > SHA256SUMS
