#!/usr/bin/env bash
# Check the built-in Terminal-Bench sample tasks with the docker CLI, the way the runner runs them:
# every task's oracle must resolve it and a no-op agent must not.
#
#   scripts/check_samples.sh [TASK_ID ...]
#
# Env: BASE_IMAGE (default metaopt-base:latest; every Dockerfile FROM is mapped to it),
#      SAMPLES_DIR (default metaopt/benchmarks/samples/terminalbench), KEEP_LOGS=1 keeps the log dir.
# Needs: docker, python3 with pyyaml (the project's own dependencies). Exit 0 iff all tasks pass.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SAMPLES=${SAMPLES_DIR:-$ROOT/metaopt/benchmarks/samples/terminalbench}
BASE=${BASE_IMAGE:-metaopt-base:latest}
RUN_ID="$$-$(date +%s)"
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/metaopt-check-samples.XXXXXX")
CONTAINERS=()
IMAGES=()

cleanup() {
    for c in "${CONTAINERS[@]}"; do docker rm -f "$c" >/dev/null 2>&1; done
    for i in "${IMAGES[@]}"; do docker rmi -f "$i" >/dev/null 2>&1; done
    if [ "${KEEP_LOGS:-0}" = 1 ] || [ "${FAILED:-0}" -gt 0 ]; then
        echo "logs: $LOGS"
    else
        rm -rf "$LOGS"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    echo "error: base image $BASE not found (build it: metaopt sandbox base)" >&2
    exit 2
fi

# meta TASK_DIR -> "FORMAT AGENT_TIMEOUT TEST_TIMEOUT"
meta() {
    python3 - "$1" <<'PY'
import sys, pathlib
d = pathlib.Path(sys.argv[1])
if (d / "task.yaml").is_file():
    import yaml
    t = yaml.safe_load((d / "task.yaml").read_text())
    print("tb1", int(float(t.get("max_agent_timeout_sec", 360))), int(float(t.get("max_test_timeout_sec", 60))))
elif (d / "task.toml").is_file() and (d / "instruction.md").is_file():
    import tomllib
    t = tomllib.loads((d / "task.toml").read_text())
    print("harbor", int(float(t.get("agent", {}).get("timeout_sec", 600))),
          int(float(t.get("verifier", {}).get("timeout_sec", 600))))
else:
    print("unknown 0 0")
PY
}

# solution.yaml -> a bash script (commands typed into one shell, so cwd and variables carry over)
yaml_to_script() {
    python3 - "$1" <<'PY'
import sys, yaml
steps = yaml.safe_load(open(sys.argv[1]))
print("#!/bin/bash")
for step in steps:
    print(step["command"])
PY
}

# pane text on stdin -> "resolved P/N" or "unresolved P/N" (TB1 pytest parser rule)
parse_pytest() {
    python3 -c '
import re, sys
text = sys.stdin.read()
parts = re.split(r"=+\s*short test summary info\s*=+", text, flags=re.I)
if len(parts) < 2:
    print("parse_error 0/0"); sys.exit()
ok = {"PASSED", "SKIPPED", "XFAIL"}
results = []
for line in parts[-1].splitlines():
    m = re.match(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+\S+", line.strip())
    if m:
        results.append(m.group(1) in ok)
good = sum(results)
print(("resolved" if results and all(results) else "unresolved"), f"{good}/{len(results)}")
'
}

# reward file text on stdin ("json" or "txt" as $1) -> "resolved SCORE" or "unresolved SCORE"
parse_reward() {
    python3 -c '
import json, math, sys
kind, text = sys.argv[1], sys.stdin.read().strip()
try:
    if kind == "json":
        data = json.loads(text)
        vals = [float(v) for v in data.values()]
        assert vals and all(math.isfinite(v) for v in vals)
        shown = ",".join(f"{k}={v:g}" for k, v in data.items())
    else:
        vals = [float(text)]
        shown = f"reward={vals[0]:g}"
except Exception:
    print("parse_error -"); sys.exit()
print(("resolved" if all(v >= 1.0 for v in vals) else "unresolved"), shown)
' "$1"
}

# trial TASK_DIR FORMAT IMAGE MODE AGENT_TIMEOUT TEST_TIMEOUT -> prints the verdict
trial() {
    local dir=$1 fmt=$2 img=$3 mode=$4 atime=$5 ttime=$6
    local id log cid wd out verdict
    id=$(basename "$dir")
    log="$LOGS/$id.$mode.log"
    cid="metaopt-check-$RUN_ID-$id-$mode"
    CONTAINERS+=("$cid")
    docker run -d --name "$cid" --network none --label metaopt.check=1 "$img" sleep infinity >>"$log" 2>&1 \
        || { echo "start_error -"; return; }
    wd=$(docker inspect -f '{{.Config.WorkingDir}}' "$img"); wd=${wd:-/}

    # ---- agent phase
    if [ "$mode" = oracle ]; then
        if [ "$fmt" = tb1 ]; then
            docker exec "$cid" mkdir -p /oracle >>"$log" 2>&1
            if [ -f "$dir/solution.sh" ]; then
                docker cp "$dir/solution.sh" "$cid:/oracle/solution.sh" >>"$log" 2>&1
            else
                yaml_to_script "$dir/solution.yaml" > "$LOGS/$id.solution.sh"
                docker cp "$LOGS/$id.solution.sh" "$cid:/oracle/solution.sh" >>"$log" 2>&1
            fi
            echo "== agent: bash /oracle/solution.sh" >>"$log"
            timeout "$atime" docker exec -w "$wd" "$cid" bash /oracle/solution.sh >>"$log" 2>&1
        else
            docker cp "$dir/solution/." "$cid:/solution" >>"$log" 2>&1
            echo "== agent: bash /solution/solve.sh" >>"$log"
            timeout "$atime" docker exec -w "$wd" "$cid" bash /solution/solve.sh >>"$log" 2>&1
        fi
        echo "== agent exit: $?" >>"$log"
    else
        # the no-op agent also checks that no test files were baked into the image
        if docker exec "$cid" test -e /tests/test_outputs.py; then
            echo "tests_in_image -"; return
        fi
    fi

    # ---- verifier phase (tests copied in only now, run as root from WORKDIR)
    if [ "$fmt" = tb1 ]; then
        docker exec "$cid" mkdir -p /tests >>"$log" 2>&1
        docker cp "$dir/run-tests.sh" "$cid:/tests/run-tests.sh" >>"$log" 2>&1
        docker cp "$dir/tests/." "$cid:/tests" >>"$log" 2>&1
        echo "== tests: bash /tests/run-tests.sh" >>"$log"
        out=$(timeout "$ttime" docker exec -u root -w "$wd" -e TEST_DIR=/tests "$cid" bash /tests/run-tests.sh 2>&1)
        echo "== run-tests exit: $?" >>"$log"
        printf '%s\n' "$out" >>"$log"
        verdict=$(printf '%s\n' "$out" | parse_pytest)
    else
        docker exec "$cid" sh -c 'mkdir -p /logs/verifier && rm -f /logs/verifier/reward.txt /logs/verifier/reward.json' >>"$log" 2>&1
        docker cp "$dir/tests/." "$cid:/tests" >>"$log" 2>&1
        echo "== tests: bash /tests/test.sh" >>"$log"
        timeout "$ttime" docker exec -u root -w "$wd" "$cid" sh -c 'bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1'
        echo "== test.sh exit: $?" >>"$log"
        docker exec "$cid" cat /logs/verifier/test-stdout.txt >>"$log" 2>&1
        if out=$(docker exec "$cid" cat /logs/verifier/reward.json 2>/dev/null); then
            verdict=$(printf '%s' "$out" | parse_reward json)
        elif out=$(docker exec "$cid" cat /logs/verifier/reward.txt 2>/dev/null); then
            verdict=$(printf '%s' "$out" | parse_reward txt)
        else
            verdict="no_reward_file -"
        fi
    fi
    docker rm -f "$cid" >/dev/null 2>&1
    echo "$verdict"
}

tasks=()
if [ "$#" -gt 0 ]; then
    for t in "$@"; do tasks+=("$SAMPLES/$t"); done
else
    for d in "$SAMPLES"/*/; do tasks+=("${d%/}"); done
fi

PASSED=0
FAILED=0
START=$(date +%s)
for dir in "${tasks[@]}"; do
    id=$(basename "$dir")
    t0=$(date +%s)
    read -r fmt atime ttime < <(meta "$dir")
    case "$fmt" in
        tb1) ctx=$dir; dockerfile=$dir/Dockerfile ;;
        harbor) ctx=$dir/environment; dockerfile=$dir/environment/Dockerfile ;;
        *) printf 'FAIL  %-24s unknown task format\n' "$id"; FAILED=$((FAILED + 1)); continue ;;
    esac
    img="metaopt-check-$RUN_ID/$id:latest"
    img=$(printf '%s' "$img" | tr 'A-Z' 'a-z')
    IMAGES+=("$img")
    if ! sed -E "s|^[[:space:]]*FROM[[:space:]]+[^[:space:]]+|FROM $BASE|I" "$dockerfile" \
        | docker build -q -t "$img" -f - "$ctx" >"$LOGS/$id.build.log" 2>&1; then
        printf 'FAIL  %-24s %-6s build failed: %s\n' "$id" "$fmt" "$(tail -n 1 "$LOGS/$id.build.log")"
        FAILED=$((FAILED + 1))
        continue
    fi
    oracle=$(trial "$dir" "$fmt" "$img" oracle "$atime" "$ttime")
    nop=$(trial "$dir" "$fmt" "$img" nop "$atime" "$ttime")
    docker rmi -f "$img" >/dev/null 2>&1
    status=PASS
    [ "${oracle%% *}" = resolved ] || status=FAIL
    [ "${nop%% *}" = unresolved ] || status=FAIL
    printf '%s  %-24s %-6s oracle=%-28s nop=%-28s %3ss\n' "$status" "$id" "$fmt" \
        "${oracle// /:}" "${nop// /:}" "$(( $(date +%s) - t0 ))"
    if [ "$status" = PASS ]; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
done
echo "---- $PASSED passed, $FAILED failed, ${#tasks[@]} tasks in $(( $(date +%s) - START ))s"
[ "$FAILED" -eq 0 ]
