#!/bin/bash
set -euo pipefail
git config --global user.name "Pricing Team"
git config --global user.email "pricing@example.com"
git config --global init.defaultBranch main
export GIT_AUTHOR_NAME="Kim Example" GIT_AUTHOR_EMAIL="kim@example.com"
export GIT_COMMITTER_NAME="Kim Example" GIT_COMMITTER_EMAIL="kim@example.com"
commit() { GIT_AUTHOR_DATE="$2" GIT_COMMITTER_DATE="$2" git commit -q -m "$1"; }
mkdir -p /app/pricing && cd /app/pricing && git init -q
cat > pricing.py <<'PY'
def total(prices, discount=0.0):
    """Sum the prices and apply a fractional discount, rounded to cents."""
    subtotal = sum(prices)
    return round(subtotal * (1 - discount), 2)
PY
cat > test_pricing.py <<'PY'
import unittest

from pricing import total


class TotalTest(unittest.TestCase):
    def test_sum(self):
        self.assertEqual(total([1.25, 2.50]), 3.75)

    def test_discount(self):
        self.assertEqual(total([10.0, 5.0], discount=0.1), 13.5)

    def test_cents(self):
        self.assertEqual(total([0.1, 0.2]), 0.3)


if __name__ == "__main__":
    unittest.main()
PY
printf '__pycache__/\n*.pyc\n' > .gitignore
git add . && commit "Add pricing.total" "2025-04-01T09:00:00+00:00"
git checkout -q -b experimental-rounding
cat > pricing.py <<'PY'
import math


def total(prices, discount=0.0):
    """Sum the prices and apply a fractional discount, rounded down to whole units."""
    subtotal = sum(prices)
    return math.floor(subtotal * (1 - discount))
PY
git add . && commit "Round totals down to whole units" "2025-04-02T09:00:00+00:00"
git checkout -q main
printf '# pricing\n\nPrice calculation helpers.\n' > README.md
git add README.md && commit "Add README" "2025-04-03T09:00:00+00:00"
GIT_AUTHOR_DATE="2025-04-04T09:00:00+00:00" GIT_COMMITTER_DATE="2025-04-04T09:00:00+00:00" \
    git merge -q --no-ff -m "Merge branch 'experimental-rounding'" experimental-rounding
printf '\n## Usage\n\n    from pricing import total\n' >> README.md
git add README.md && commit "Document usage" "2025-04-05T09:00:00+00:00"
