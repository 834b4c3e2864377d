"""A generated-style mechanism (what a Level-2 session writes): prompt-only revisions were rejected
(or dropped) again and again, so it says so to the proposer and drops the next prompt-only ones."""

class Mechanism:
    name = "prompt_tabu"

    def __init__(self):
        self.rejected = 0

    def on_result(self, candidate, decision, ctx):
        if candidate["status"] in ("rejected", "invalid") and candidate["areas"] == ["prompts"]:
            self.rejected += 1

    def guidance(self, ctx):
        if self.rejected < 2:
            return None
        return f"PROMPT-TABU: {self.rejected} prompt-only revisions failed; change something else than the prompts."

    def filter(self, revision, ctx):
        if self.rejected >= 2 and revision["areas"] == ["prompts"]:
            return f"prompt-only revisions keep failing ({self.rejected} so far)"
        return True

    def state_dict(self):
        return {"rejected": self.rejected}

    def load_state_dict(self, state):
        self.rejected = int(state["rejected"])
