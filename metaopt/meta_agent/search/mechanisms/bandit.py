"""Built-in mechanism `bandit`: a UCB1 bandit over the change areas the proposer can reach
(prompts, tools, routing, limits; frozen areas excluded). Reward 1 for an accepted candidate in
each area it touched, 0 for any other decided one. The guidance names the area to work on next:
an area never tried first, then the one with the highest upper confidence bound."""

import math

ORDER = ("prompts", "tools", "routing", "limits")


class Mechanism:
    name = "bandit"

    def __init__(self):
        self.pulls = {}
        self.wins = {}

    def on_result(self, candidate, decision, ctx):
        if decision["stage"] == "filter":
            return  # dropped before any trial: says nothing about the area
        for area in candidate["areas"]:
            self.pulls[area] = self.pulls.get(area, 0) + 1
            self.wins[area] = self.wins.get(area, 0) + (candidate["status"] == "accepted")
        return

    def choose(self, ctx):
        frozen = set(ctx["search"]["freeze"])
        arms = [a for a in ORDER if a in ctx["proposer"]["areas"] and a not in frozen]
        if len(arms) < 2:
            return None  # nothing to choose between
        total = sum(self.pulls.get(a, 0) for a in arms)

        def ucb(a):
            n = self.pulls.get(a, 0)
            if n == 0:
                return float("inf")
            return self.wins.get(a, 0) / n + math.sqrt(2 * math.log(max(total, 1)) / n)

        return max(arms, key=lambda a: (ucb(a), -ORDER.index(a)))

    def guidance(self, ctx):
        arm = self.choose(ctx)
        if arm is None:
            return None
        seen = ", ".join(f"{a} {self.wins.get(a, 0)}/{self.pulls.get(a, 0)}" for a in ORDER if a in self.pulls)
        return (f"Work on the {arm} area of the harness in this proposal (a bandit over change areas; "
                f"accepted/tried so far: {seen or 'nothing tried yet'}).")

    def state_dict(self):
        return {"pulls": dict(self.pulls), "wins": dict(self.wins)}

    def load_state_dict(self, state):
        self.pulls = {str(k): int(v) for k, v in state["pulls"].items()}
        self.wins = {str(k): int(v) for k, v in state["wins"].items()}
