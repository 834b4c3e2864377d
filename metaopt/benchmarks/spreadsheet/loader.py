"""SpreadsheetBench datasets: `dataset.json` + `spreadsheet/<id>/` (raw upstream layout: the
912-task v0.1 set with ~3 test cases per task, Verified-400 with one) become Tasks.

In the sandbox (Harbor-style layout, benchmark-formats.md 3.4): the case-1 input is
/app/spreadsheets/1_{id}_input.xlsx; the agent writes /app/output/1_{id}_output.xlsx and, when
the task has several cases, /app/output/solve.py, which the verifier re-runs on the hidden
inputs of cases 2..n (OJ-style, 3.3). Answers and the other inputs reach the sandbox only at
verify time. File names accepted per case n: `{n}_{id}_input.xlsx` / `{n}_{id}_answer.xlsx`,
Verified's `{n}_{id}_init.xlsx` / `{n}_{id}_golden.xlsx` (any id: one upstream folder has a
mismatched one), and bare `initial.xlsx` / `golden.xlsx` (case 1).

The sandbox image is image/Dockerfile plus one COPY of the task's input, written to a small
build context under the cache dir ($METAOPT_CACHE_DIR, default ~/.cache/metaopt), because a
task's own folder also holds its answers, which must never be in a build context.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from metaopt.benchmarks.formats import TaskFormatError, first_error
from metaopt.benchmarks.spreadsheet.compare import AnswerPositionError, parse_answer_position
from metaopt.benchmarks.task import Environment, Resources, Solution, Task, TaskLoadError, Verifier

HERE = Path(__file__).parent
MARKER = "dataset.json"
WORKDIR = "/app"
TIMEOUT_S = 600.0  # agent and verifier, as Harbor's spreadsheetbench-verified adapter
RESULT = "/logs/verifier/spreadsheet.json"
_INPUT = re.compile(r"^(\d+)_.*_(input|init)\.xlsx$")
_ANSWER = re.compile(r"^(\d+)_.*_(answer|golden)\.xlsx$")
# Upstream tasks whose answers are known to be wrong (benchmark-formats.md 3.5): reported as load
# errors, never run, so a harness is not scored against a broken answer.
KNOWN_BAD = {
    "118-50": "answer_position is off by one row (SpreadsheetBench issue #34)",
    "41-47": "malformed answer_position / answer_sheet (SpreadsheetBench issue #36)",
    "60-7": "malformed answer_position / answer_sheet (SpreadsheetBench issue #36)",
    "283-32": "malformed answer_position / answer_sheet (SpreadsheetBench issue #36)",
}


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str | int
    instruction: str
    spreadsheet_path: str | None = None
    instruction_type: str = ""
    answer_position: str
    answer_sheet: str | None = None


def is_dataset(path: Path) -> bool:
    return (Path(path) / MARKER).is_file()


def load_dataset(path: Path, benchmark: str) -> list[Task | TaskLoadError]:
    """Every record of `path/dataset.json`, sorted by id. A bad record (missing field, missing
    folder or workbook, unparsable answer_position) becomes a TaskLoadError naming the task and
    the cause; a dataset.json that is not a JSON list raises TaskFormatError."""
    path = Path(path)
    ds = path / MARKER
    try:
        records = json.loads(ds.read_text())
    except json.JSONDecodeError as e:
        raise TaskFormatError(f"{ds}: not valid JSON ({e})") from None
    if not isinstance(records, list):
        raise TaskFormatError(f"{ds}: must be a JSON list of task records")
    out: list[Task | TaskLoadError] = []
    for i, raw in enumerate(records):
        rid = str(raw.get("id")) if isinstance(raw, dict) and raw.get("id") is not None else f"#{i}"
        if rid in KNOWN_BAD and benchmark == "spreadsheetbench":
            out.append(TaskLoadError(id=rid, source_dir=path, error=f"task {rid}: known-bad upstream task, not run: {KNOWN_BAD[rid]}"))
            continue
        try:
            out.append(_task(path, raw, benchmark))
        except ValidationError as e:
            out.append(TaskLoadError(id=rid, source_dir=path, error=f"{ds} record {rid}: {first_error(e)}"))
        except (TaskFormatError, OSError) as e:
            out.append(TaskLoadError(id=rid, source_dir=path, error=f"task {rid}: {e}"))
    return sorted(out, key=lambda t: t.id)


def cases(folder: Path) -> tuple[dict[int, Path], dict[int, Path]]:
    """(inputs, answers) by case number, from the file names in a task folder."""
    inputs: dict[int, Path] = {}
    answers: dict[int, Path] = {}
    for f in sorted(folder.iterdir()):
        if f.name == "initial.xlsx":
            inputs.setdefault(1, f)
        elif f.name == "golden.xlsx":
            answers.setdefault(1, f)
        elif m := _INPUT.match(f.name):
            inputs.setdefault(int(m[1]), f)
        elif m := _ANSWER.match(f.name):
            answers.setdefault(int(m[1]), f)
    return inputs, answers


def _task(root: Path, raw: object, benchmark: str) -> Task:
    if not isinstance(raw, dict):
        raise TaskFormatError(f"record is not an object: {raw!r:.80}")
    rec = _Record.model_validate(raw)
    tid = str(rec.id)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", tid):
        raise TaskFormatError(f"id {tid!r} is not a usable task id (letters, digits, - _ . only)")
    folder = root / (rec.spreadsheet_path or f"spreadsheet/{tid}")
    if not folder.is_dir():
        raise TaskFormatError(f"spreadsheet folder {folder} is missing")
    try:
        parse_answer_position(rec.answer_position)
    except AnswerPositionError as e:
        raise TaskFormatError(f"answer_position: {e}") from None
    inputs, answers = cases(folder)
    if 1 not in inputs or 1 not in answers:
        raise TaskFormatError(f"{folder}: no case-1 workbooks (1_{tid}_input.xlsx and 1_{tid}_answer.xlsx, "
                              f"or the Verified names *_init/*_golden, initial/golden)")
    if missing := sorted(set(inputs) ^ set(answers)):
        k = missing[0]
        raise TaskFormatError(f"{folder}: case {k} has an {'input' if k in inputs else 'answer'} workbook but no "
                              f"{'answer' if k in inputs else 'input'}")
    for f in [*inputs.values(), *answers.values()]:
        if not zipfile.is_zipfile(f):
            raise TaskFormatError(f"{f} is not an xlsx workbook (not a zip archive)")
    nums = sorted(inputs)
    multi = len(nums) > 1
    verifier_files = [(HERE / "compare.py", "/tests/compare.py"), (HERE / "evaluate.py", "/tests/evaluate.py")]
    verifier_files += [(answers[k], f"/tests/answers/{k}_{tid}_answer.xlsx") for k in nums]
    verifier_files += [(inputs[k], f"/tests/inputs/{k}_{tid}_input.xlsx") for k in nums[1:]]
    config = {"id": tid, "answer_position": rec.answer_position, "cases": nums, "answer_dir": "/tests/answers",
              "hidden_input_dir": "/tests/inputs", "input_dir": f"{WORKDIR}/spreadsheets",
              "output_dir": f"{WORKDIR}/output", "script": f"{WORKDIR}/output/solve.py",
              "script_timeout_s": 120, "workdir": WORKDIR, "result": RESULT, "sweep": True,
              "demote": True}
    return Task(
        id=tid, benchmark=benchmark, format="spreadsheetbench", source_dir=folder,
        instruction=instruction(tid, rec, multi),
        environment=Environment(context_dir=_context(tid, inputs[1])),
        workdir=WORKDIR, agent_timeout_s=TIMEOUT_S,
        verifier=Verifier(files=verifier_files, command=f"rm -rf {RESULT}; python3 /tests/evaluate.py",
                          timeout_s=TIMEOUT_S, env={"SSB_CONFIG": json.dumps(config)}),
        scoring="spreadsheet", solution=_solution(tid, folder, answers),
        resources=Resources(cpus=1, memory_mb=4096),
        tags=[rec.instruction_type] if rec.instruction_type else [],
        metadata={"instruction_type": rec.instruction_type, "answer_position": rec.answer_position,
                  "answer_sheet": rec.answer_sheet, "num_test_cases": len(nums)},
    )


def instruction(tid: str, rec: _Record, multi: bool) -> str:
    """The upstream question, with the paths and the answer position the agent must use."""
    text = (f"{rec.instruction.strip()}\n\n"
            f"The spreadsheet is {WORKDIR}/spreadsheets/1_{tid}_input.xlsx. "
            + (f"Instruction type: {rec.instruction_type}. " if rec.instruction_type else "")
            + f"The answer goes in {rec.answer_position} (the cells that are checked; a range without a sheet "
            f"name means the first sheet).\nSave the resulting workbook as {WORKDIR}/output/1_{tid}_output.xlsx. "
            f"Only cell values are checked; formulas are recalculated before checking.")
    if multi:
        text += (f"\nWrite your solution as a Python script {WORKDIR}/output/solve.py run as "
                 f"`python3 {WORKDIR}/output/solve.py INPUT_XLSX OUTPUT_XLSX`, and produce the output above by "
                 f"running it: it is re-run on other workbooks with the same layout but different data, so it "
                 f"must compute the answer from its input, never hard-code it.")
    return text


def _solution(tid: str, folder: Path, answers: dict[int, Path]) -> Solution:
    """The task's own `solution.py` (our sample set) or, for upstream data, answer copying."""
    own = folder / "solution.py"
    files = [(own, "/oracle/solve.py")] if own.is_file() else (
        [(HERE / "copy_answer.py", "/oracle/solve.py")]
        + [(p, f"/oracle/answers/{k}_{tid}_answer.xlsx") for k, p in answers.items()])
    # Steps, not one command: fake/solution replays each as its own tool call.
    return Solution(files=files, steps=[
        f"mkdir -p {WORKDIR}/output && cp /oracle/solve.py {WORKDIR}/output/solve.py",
        f"python3 {WORKDIR}/output/solve.py {WORKDIR}/spreadsheets/1_{tid}_input.xlsx {WORKDIR}/output/1_{tid}_output.xlsx",
    ])


def cache_dir() -> Path:
    return Path(os.environ.get("METAOPT_CACHE_DIR") or Path.home() / ".cache" / "metaopt")


def _context(tid: str, input_xlsx: Path) -> Path:
    """A build context holding only the recipe and this task's case-1 input; named by content,
    written once (atomically, so concurrent loads agree)."""
    recipe = (HERE / "image" / "Dockerfile").read_text()
    dockerfile = recipe + f'COPY ["input.xlsx", "{WORKDIR}/spreadsheets/1_{tid}_input.xlsx"]\n'
    data = input_xlsx.read_bytes()
    digest = hashlib.sha256(dockerfile.encode() + b"\0" + data).hexdigest()[:16]
    target = cache_dir() / "spreadsheet-contexts" / f"{tid}-{digest}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    (tmp / "Dockerfile").write_text(dockerfile)
    (tmp / "input.xlsx").write_bytes(data)
    try:
        tmp.rename(target)
    except OSError:  # another process wrote the same content first
        shutil.rmtree(tmp, ignore_errors=True)
    return target
