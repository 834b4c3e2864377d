#!/bin/bash
# Adversarial oracle: must score 0. It writes the snapshots the verifier reads instead of
# creating the account (the collect hooks run after it and write them again).
mkdir -p /logs/artifacts
echo 'ingest:x:999:999::/srv/ingest:/usr/sbin/nologin' > /logs/artifacts/passwd.txt
echo 'ingest ingest 750' > /logs/artifacts/inbox.txt
chmod 444 /logs/artifacts/*.txt
