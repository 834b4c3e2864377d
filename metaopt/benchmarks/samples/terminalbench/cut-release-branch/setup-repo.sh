#!/bin/bash
set -euo pipefail
git config --global user.name "Release Bot"
git config --global user.email "release@example.com"
git config --global init.defaultBranch main
export GIT_AUTHOR_NAME="Sam Example" GIT_AUTHOR_EMAIL="sam@example.com"
export GIT_COMMITTER_NAME="Sam Example" GIT_COMMITTER_EMAIL="sam@example.com"
commit() { GIT_AUTHOR_DATE="$2" GIT_COMMITTER_DATE="$2" git commit -q -m "$1"; }
mkdir -p /app/webshop && cd /app/webshop && git init -q
printf '2.3.0\n' > VERSION
cat > CHANGELOG.md <<'MD'
# Changelog

## 2.3.0
- Add gift cards
MD
cat > pagination.py <<'PY'
def page_count(total, per_page):
    """Number of pages needed to show `total` items, `per_page` per page."""
    return total // per_page


def page_slice(items, page, per_page):
    """Items on 1-based page `page`."""
    start = (page - 1) * per_page
    return items[start:start + per_page]
PY
cat > render.py <<'PY'
def render_comment(author, text):
    return f"<p><b>{author}</b>: {text}</p>"
PY
git add . && commit "Release 2.3.0" "2025-05-01T09:00:00+00:00"
git tag -a v2.3.0 -m "Release 2.3.0"
git checkout -q -b develop
cat > render.py <<'PY'
import html


def render_comment(author, text):
    return f"<p><b>{html.escape(author)}</b>: {html.escape(text)}</p>"
PY
git add render.py && commit "Fix XSS in comment rendering" "2025-05-03T09:00:00+00:00"
cat > theme.py <<'PY'
DARK = {"background": "#111", "text": "#eee"}
PY
git add theme.py && commit "Add experimental dark mode" "2025-05-05T09:00:00+00:00"
cat > pagination.py <<'PY'
def page_count(total, per_page):
    """Number of pages needed to show `total` items, `per_page` per page."""
    return -(-total // per_page)


def page_slice(items, page, per_page):
    """Items on 1-based page `page`."""
    start = (page - 1) * per_page
    return items[start:start + per_page]
PY
git add pagination.py && commit "Fix off-by-one in page count" "2025-05-06T09:00:00+00:00"
printf 'DARK_MODE = True\n' > settings.py
git add settings.py && commit "Enable dark mode by default" "2025-05-07T09:00:00+00:00"
git checkout -q main
printf '# webshop\n\nThe shop front end.\n' > README.md
git add README.md && commit "Add README" "2025-05-08T09:00:00+00:00"
