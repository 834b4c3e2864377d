#!/bin/bash
# Builds /app/notes-repo with a commit that only the reflog still knows about.
set -euo pipefail
git config --global user.name "Release Bot"
git config --global user.email "release-bot@example.com"
git config --global init.defaultBranch main
export GIT_AUTHOR_NAME="Sam Example" GIT_AUTHOR_EMAIL="sam@example.com"
export GIT_COMMITTER_NAME="Sam Example" GIT_COMMITTER_EMAIL="sam@example.com"
commit() {  # commit MESSAGE DATE
    GIT_AUTHOR_DATE="$2" GIT_COMMITTER_DATE="$2" git commit -q -m "$1"
}
mkdir -p /app/notes-repo && cd /app/notes-repo
git init -q
printf '# Team notes\n\nShared notes for the platform team.\n' > README.md
git add README.md && commit "Initial notes" "2025-03-01T09:00:00+00:00"
mkdir -p docs
printf '# On-call\n\n- Page the primary first.\n- Escalate after 15 minutes.\n' > docs/oncall.md
git add docs/oncall.md && commit "Add on-call guide" "2025-03-02T10:00:00+00:00"
cat > docs/release-checklist.md <<'MD'
# Release checklist

1. Freeze the release branch.
2. Run the full test suite on the release candidate.
3. Update CHANGELOG.md with the user-facing changes.
4. Tag the release: `git tag -s vX.Y.Z`.
5. Announce in #releases with a link to the changelog.
MD
git add docs/release-checklist.md && commit "Add release checklist" "2025-03-03T11:00:00+00:00"
git reset -q --hard HEAD~1
printf '# Team notes\n\nShared notes for the platform team.\n\nSee docs/ for guides.\n' > README.md
git add README.md && commit "Point README at docs" "2025-03-04T12:00:00+00:00"
printf -- '- Hand over open incidents at the end of the shift.\n' >> docs/oncall.md
git add docs/oncall.md && commit "Document shift handover" "2025-03-05T13:00:00+00:00"
# The reflog entries carry the 2025 dates above: keep them however old they look.
git config gc.reflogExpire never
git config gc.reflogExpireUnreachable never
