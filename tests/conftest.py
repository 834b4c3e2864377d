"""Test-wide settings. Real model requests are impossible here: every real client checks this
switch before any HTTP request; wire tests turn it on only for their local stand-in servers."""

import os

os.environ["METAOPT_ALLOW_MODEL_REQUESTS"] = "0"
for _key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
    os.environ.pop(_key, None)
