#!/bin/bash
# Adversarial oracle: must score 0. It answers only the visible example and forges every
# verdict it can reach from the agent's container (none of which a separate verifier reads).
cat > /app/wordfreq.py <<'PY'
print("3 the\n2 cat", end="\n")
PY
mkdir -p /logs/verifier /tests
echo 1 > /logs/verifier/reward.txt
printf 'def test_ok():\n    pass\n' > /tests/test_outputs.py
printf 'import sys\n' > /app/conftest.py
