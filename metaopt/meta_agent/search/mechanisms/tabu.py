"""Built-in mechanism `tabu`: kinds of change that were recently rejected are tabu for a few
iterations. The proposer is told which (guidance), and a revision whose every change is tabu is
dropped before any trial is spent (filter). An accepted change lifts its kinds' tabu."""


class Mechanism:
    name = "tabu"
    tenure = 4  # iterations a rejected kind of change stays tabu

    def __init__(self):
        self.until = {}  # change kind -> last iteration it is tabu

    def on_result(self, candidate, decision, ctx):
        if candidate["status"] == "accepted":
            for kind in candidate["kinds"]:
                self.until.pop(kind, None)
        elif candidate["status"] in ("rejected", "invalid") and decision["stage"] != "filter":
            for kind in candidate["kinds"]:
                self.until[kind] = candidate["iteration"] + self.tenure

    def active(self, ctx):
        return sorted(k for k, last in self.until.items() if last >= ctx["iteration"])

    def guidance(self, ctx):
        kinds = self.active(ctx)
        if not kinds:
            return None
        return ("These kinds of change were rejected in the last few iterations and are tabu: "
                + ", ".join(kinds) + ". Change something else.")

    def filter(self, revision, ctx):
        kinds = set(revision["kinds"])
        tabu = set(self.active(ctx))
        if kinds and kinds <= tabu:
            return "tabu: every change it makes (" + ", ".join(sorted(kinds)) + ") was rejected recently"
        return True

    def state_dict(self):
        return {"until": dict(self.until)}

    def load_state_dict(self, state):
        self.until = {str(k): int(v) for k, v in state["until"].items()}
