#!/bin/bash
# checks /app/conf/app.ini
grep -qx "port=8080" /app/conf/app.ini || { echo "FAIL: port is not 8080"; exit 1; }
grep -qx "admin_port=9090" /app/conf/app.ini || { echo "FAIL: admin_port must stay 9090"; exit 1; }
echo "OK: config valid"
