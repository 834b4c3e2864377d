#!/bin/bash
set -euo pipefail
cd /app
tar -xzf incoming/inventory-service-1.4.0.tar.gz -C /app
cd /app/inventory-service-1.4.0
rm -f /app/dist/inventory-service-src.zip
{ echo README.md; echo LICENSE; find src -type f -name '*.py' | sort; } \
  | zip -X -D /app/dist/inventory-service-src.zip -@
unzip -l /app/dist/inventory-service-src.zip
