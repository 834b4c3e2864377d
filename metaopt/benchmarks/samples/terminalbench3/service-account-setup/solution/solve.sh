#!/bin/bash
set -e
useradd --system --home-dir /srv/ingest --create-home --shell /usr/sbin/nologin --user-group ingest
mkdir -p /srv/ingest/inbox
chown ingest:ingest /srv/ingest/inbox
chmod 750 /srv/ingest/inbox
