"""A deliberately broken mechanism: it passes the validation ladder (no recorded candidate reaches
iteration 5) and fails live (a list sized for five iterations: IndexError), to show the rollback."""

class Mechanism:
    name = "late_crash"

    def __init__(self):
        self.per_iteration = [0, 0, 0, 0, 0]

    def on_result(self, candidate, decision, ctx):
        self.per_iteration[candidate["iteration"]] += 1

    def guidance(self, ctx):
        return f"LATE-CRASH: results per iteration so far: {self.per_iteration}."

    def state_dict(self):
        return {"per_iteration": list(self.per_iteration)}

    def load_state_dict(self, state):
        self.per_iteration = [int(x) for x in state["per_iteration"]]
