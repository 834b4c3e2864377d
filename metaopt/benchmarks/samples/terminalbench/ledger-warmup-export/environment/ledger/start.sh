#!/bin/bash
# Starts ledgerd in the foreground; logs go to stdout.
exec python3 /app/ledger/ledgerd.py "$@"
