#!/bin/bash
# Writes the shipd log directory as it looks on the morning of 2025-06-01, before rotation.
set -euo pipefail
LOGS=/var/log/shipd
mkdir -p "$LOGS"
cd "$LOGS"
emit() {  # emit SERVICE DAY LINES
    local svc=$1 day=$2 n=$3 i
    for i in $(seq 1 "$n"); do
        printf '2025-05-%02d %02d:%02d:%02d %s[%d]: request %d handled in %d ms\n' \
            "$day" $(( i % 24 )) $(( (i * 7) % 60 )) $(( (i * 13) % 60 )) "$svc" $(( 4000 + day )) "$i" $(( (i * 37 + day) % 500 ))
    done
}
emit api 31 120 > api.log
emit api 30 110 > api.log.1
emit api 29 100 > api.log.2 && gzip -n api.log.2
emit api 28 90 > api.log.3 && gzip -n api.log.3
emit worker 31 60 > worker.log
emit worker 30 55 > worker.log.1
emit worker 29 50 > worker.log.2 && gzip -n worker.log.2
emit scheduler 31 24 > scheduler.log
emit debug 31 300 > debug.log
chmod 644 ./*.log
chmod 640 ./*.log.*
printf 'shipd writes api.log, worker.log and scheduler.log here. debug.log is managed by hand.\n' > README
