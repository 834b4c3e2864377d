#!/bin/bash
# Dump the application database into $BACKUP_DIR as app-YYYYmmdd-HHMMSS.sql.gz.
# Configuration comes from /etc/default/db-backup (DB_PATH, BACKUP_DIR, RETENTION_DAYS).
set -euo pipefail
# shellcheck disable=SC1091
. /etc/default/db-backup
: "${DB_PATH:?DB_PATH is not set}" "${BACKUP_DIR:?BACKUP_DIR is not set}"
[ -d "$BACKUP_DIR" ] || { echo "db-backup: $BACKUP_DIR does not exist" >&2; exit 1; }
out="$BACKUP_DIR/app-$(date -u +%Y%m%d-%H%M%S).sql.gz"
sqlite3 "$DB_PATH" .dump | gzip -n > "$out"
chmod 640 "$out"
echo "db-backup: wrote $out"
