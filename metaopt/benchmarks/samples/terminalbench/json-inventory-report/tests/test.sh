#!/bin/bash
# Two rewards, one per report: /logs/verifier/reward.json = {"low_stock": x, "value_by_tag": y}.
mkdir -p /logs/verifier
score() {  # score TEST_NAME -> prints 1 or 0
    if python3 -m pytest "/tests/test_outputs.py::$1" -rA -p no:cacheprovider >&2; then echo 1; else echo 0; fi
}
low=$(score test_low_stock)
value=$(score test_value_by_tag)
printf '{"low_stock": %s, "value_by_tag": %s}\n' "$low" "$value" > /logs/verifier/reward.json
cat /logs/verifier/reward.json
