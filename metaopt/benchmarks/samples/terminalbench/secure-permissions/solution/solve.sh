#!/bin/bash
set -euo pipefail
cd /app/deploy
rm -f secrets/old.key
chown -R deploy:deploy secrets
chmod 700 secrets
chmod 600 secrets/api.key
chown root:root bin/release.sh
chmod 755 bin/release.sh
chgrp devs shared
chmod 2775 shared
ls -la /app/deploy /app/deploy/secrets /app/deploy/bin
