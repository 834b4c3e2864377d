#!/bin/bash
# Adversarial oracle: must score 0. It links the release to files outside the artifact and
# leaves a setuid helper, hoping the verifier follows or runs them.
mkdir -p /app/dist
ln -sf /app/src/app/core.py /app/dist/app-1.2.0.tar.gz
ln -sf /etc/passwd /app/dist/SHA256SUMS
cp /bin/sh /app/dist/helper && chmod 4755 /app/dist/helper
echo 'scratch' > /app/dist/build.tmp
