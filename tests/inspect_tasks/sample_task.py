"""An inspect-ai task used by tests/test_inspect_bridge.py: four samples, each checked a different
way by the task's own scorer (inspect's match() and includes() on the answer, and two checks that
read files in the sandbox through `sandbox().exec`)."""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, includes, match, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import sandbox


@scorer(metrics=[accuracy()])
def file_lines():
    """Fraction of the target lines found in the file named by the sample's metadata `file`."""

    async def score(state: TaskState, target: Target) -> Score:
        path = state.metadata["file"]
        r = await sandbox().exec(["cat", path])
        if not r.success:
            return Score(value=INCORRECT, answer="", explanation=f"cannot read {path}: {r.stderr.strip()}")
        found = [t for t in target.target if t in r.stdout.splitlines()]
        value = len(found) / len(target.target)
        return Score(value=CORRECT if value == 1 else INCORRECT if value == 0 else value, answer=r.stdout,
                     explanation=f"{len(found)} of {len(target.target)} lines found in {path}",
                     metadata={"found": found})

    return score


@scorer(metrics=[accuracy()])
def by_check():
    """Dispatches on the sample's metadata `check`: match, includes or file."""
    checks = {"match": match(), "includes": includes(), "file": file_lines()}

    async def score(state: TaskState, target: Target) -> Score:
        return await checks[state.metadata["check"]](state, target)

    return score


@task
def my_task():
    return Task(
        dataset=[
            Sample(id="arith", input="What is 2 + 2?", target="4", metadata={"check": "match"}),
            Sample(id="capital", input="What is the capital of France?", target="Paris",
                   metadata={"check": "includes"}),
            Sample(id="file-made", input="Write hello to work/out.txt.", target="hello",
                   metadata={"check": "file", "file": "work/out.txt"}),
            Sample(id="file-partial", input="Write hello and world, one per line, to work/out.txt.",
                   target=["hello", "world"], metadata={"check": "file", "file": "work/out.txt"}),
        ],
        scorer=by_check(),
        sandbox="docker",
    )


@task
def broken_task():
    raise RuntimeError("this task cannot be built")


@scorer(metrics=[accuracy()])
def copied():
    """work/copy.txt must hold the staged file's text, and the setup script must have run."""

    async def score(state: TaskState, target: Target) -> Score:
        r = await sandbox().exec(["bash", "-c", "cat work/copy.txt && cat /tmp/setup-ran"])
        return Score(value=CORRECT if r.stdout == "abc\nran\n" else INCORRECT, answer=r.stdout)

    return score


@task
def staged_task():
    """Sample files and a setup script; the oracle runs each sample's metadata `solution`."""
    files = {"data/in.txt": "abc\n"}
    setup = "echo ran > /tmp/setup-ran"
    return Task(
        dataset=[
            Sample(id="copies", input="Copy data/in.txt to work/copy.txt.", files=files, setup=setup,
                   metadata={"solution": "mkdir -p work && cp data/in.txt work/copy.txt"}),
            Sample(id="does-nothing", input="Copy data/in.txt to work/copy.txt.", files=files, setup=setup,
                   metadata={"solution": "true"}),
        ],
        scorer=copied(),
    )


@scorer(metrics=[accuracy()])
def raises():
    async def score(state: TaskState, target: Target) -> Score:
        raise ValueError("boom")

    return score


@task
def raising_task():
    """Its scorer raises: the trial is an error, never a 0."""
    return Task(dataset=[Sample(id="s", input="Do nothing.")], scorer=raises())
