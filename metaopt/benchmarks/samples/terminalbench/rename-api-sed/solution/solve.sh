#!/bin/bash
set -euo pipefail
cd /app/service
find . -path ./vendor -prune -o -type f -name '*.py' -print0 \
  | xargs -0 sed -i -E 's/(^|[^A-Za-z0-9_])getUserData([^A-Za-z0-9_]|$)/\1get_user_data\2/g'
# a second pass catches back-to-back matches that share a delimiter character
find . -path ./vendor -prune -o -type f -name '*.py' -print0 \
  | xargs -0 sed -i -E 's/(^|[^A-Za-z0-9_])getUserData([^A-Za-z0-9_]|$)/\1get_user_data\2/g'
find . -path ./vendor -prune -o -type f -name '*.yaml' -print0 \
  | xargs -0 sed -i -E 's#http://internal\.example\.com([/:]|$)#https://internal.example.com\1#g'
python3 main.py
