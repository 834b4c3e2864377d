"""Built-in mechanism `explore`: forced exploration of areas no candidate has touched yet. Every
`period` iterations, while the proposer can reach an untouched area, the guidance demands a
change there, and on that iteration a revision that touches none of them is dropped."""

ORDER = ("prompts", "tools", "routing", "limits")


class Mechanism:
    name = "explore"
    period = 3

    def __init__(self):
        self.touched = []
        self.forced_at = -1000
        self.forced_areas = []

    def on_result(self, candidate, decision, ctx):
        for area in candidate["areas"]:
            if area not in self.touched:
                self.touched.append(area)

    def guidance(self, ctx):
        frozen = set(ctx["search"]["freeze"])
        untouched = [a for a in ORDER if a in ctx["proposer"]["areas"] and a not in self.touched
                     and a not in frozen]
        if not untouched or ctx["iteration"] - self.forced_at < self.period:
            return None
        self.forced_at, self.forced_areas = ctx["iteration"], untouched
        return ("No candidate has changed these areas of the harness yet: " + ", ".join(untouched)
                + ". This proposal must change at least one of them.")

    def filter(self, revision, ctx):
        if self.forced_at != ctx["iteration"] or set(revision["areas"]) & set(self.forced_areas):
            return True
        return "forced exploration: this iteration had to change one of " + ", ".join(self.forced_areas)

    def state_dict(self):
        return {"touched": list(self.touched), "forced_at": self.forced_at, "forced_areas": list(self.forced_areas)}

    def load_state_dict(self, state):
        self.touched = [str(a) for a in state["touched"]]
        self.forced_at = int(state["forced_at"])
        self.forced_areas = [str(a) for a in state["forced_areas"]]
