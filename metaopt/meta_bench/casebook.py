"""The built-in cases, as data: each task's replay policy and each case's planted defect and
reference fix. `meta_bench.record` turns them into case folders (manifest.yaml, harness/) and
records their traces in real containers; nothing here is read at bench time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TERMINAL = "../../tasks/terminal"
SHEETS = "../../../benchmarks/samples/spreadsheetbench"
_SOLVE = (Path(__file__).parents[1] / "benchmarks/samples/spreadsheetbench/spreadsheet/sum-by-region/solution.py")

MKOUT = "mkdir -p /app/out && "
POLICIES: dict[str, dict[str, Any]] = {
    "greet": {"steps": [{"id": "write", "run": MKOUT + "echo 'hello, world' > /app/out/hello.txt", "sets": {"hello": "ok"}}],
              "pass_if": {"hello": "ok"}},
    "slow-index": {"steps": [
        {"id": "look", "run": "ls -la /app"},
        {"id": "build", "run": "bash /app/build_index.sh"},
        {"id": "write", "when": {"output": "indexed 412 records"}, "run": MKOUT + "echo 412 > /app/out/count.txt",
         "sets": {"count": "ok"}}],
        "pass_if": {"count": "ok"}},
    "service-limit": {"steps": [
        {"id": "look", "run": "ls -la /app/logs"},
        {"id": "read", "run": "cat /app/logs/service.log"},
        {"id": "answer", "when": {"output": "FATAL quota exceeded: limit=37"}, "run": MKOUT + "echo 37 > /app/out/limit.txt",
         "sets": {"limit": "ok"},
         "else": {"run": MKOUT + "tail -n 1 /app/logs/service.log | grep -o 'limit=[0-9]*' | cut -d= -f2 > /app/out/limit.txt",
                  "sets": {"limit": "guessed"}}}],
        "pass_if": {"limit": "ok"}},
    "region-report": {"steps": [
        {"id": "look", "run": "head -n 5 /app/data/sales.txt; ls /app/tools"},
        {"id": "reindex", "run": "bash /app/tools/reindex.sh"},
        {"id": "write", "when": {"prompt": "(?i)header row"},
         "run": MKOUT + "{ echo region,total; awk '{s[$1]+=$2} END {for (r in s) print r \",\" s[r]}' /app/data/sales.txt"
                " | sort; } > /app/out/report.csv && cat /app/out/report.csv",
         "sets": {"report": "ok"},
         "else": {"run": MKOUT + "awk '{s[$1]+=$2} END {for (r in s) print r \",\" s[r]}' /app/data/sales.txt | sort"
                         " > /app/out/report.csv && cat /app/out/report.csv", "sets": {"report": "no header"}}}],
        "pass_if": {"report": "ok"}},
    "port-config": {"steps": [
        {"id": "look", "run": "cat /app/conf/app.ini"},
        {"id": "edit", "run": "sed -i 's/port=.*/port=8080/' /app/conf/app.ini", "sets": {"conf": "admin port clobbered"}},
        {"id": "check", "when": {"prompt": "(?i)verify before you finish|verify your work|check each one with a command"}, "run": "bash /app/check.sh"},
        {"id": "repair", "when": {"output": "FAIL: admin_port"},
         "run": "sed -i 's/^admin_port=.*/admin_port=9090/' /app/conf/app.ini && bash /app/check.sh", "sets": {"conf": "ok"}}],
        "pass_if": {"conf": "ok"}},
    "sum-by-region": {"steps": [
        {"id": "inspect", "tool": "inspect_workbook", "args": {"path": "/app/spreadsheets/1_sum-by-region_input.xlsx"}},
        {"id": "script", "tool": "write_file", "args": {"path": "/app/output/solve.py", "content": _SOLVE.read_text()},
         "sets": {"script": "written"}},
        {"id": "run", "run": "python3 /app/output/solve.py /app/spreadsheets/1_sum-by-region_input.xlsx "
                             "/app/output/1_sum-by-region_output.xlsx && echo solved", "sets": {"output": "saved"}}],
        "pass_if": {"script": "written", "output": "saved"}},
}

CONVENTIONS = ("CSV files you write start with a header row naming the columns in lower case, and their rows are "
               "sorted by the first column.")
VERIFY_LINE = ("3. Verify before you finish. Run the program, the tests, or a quick check that shows the result is right: "
               "compare output with what the task asks for (exact file paths, names, formats, permissions). If there are "
               "tests in the repository, run them. A task is only done when you have seen evidence that it works.\n")
QUOTED_TEMPLATE = {"set_tool": {"name": "bash", "template": "{command}"}}
RAW_TEMPLATE = {"set_tool": {"name": "bash", "template": "{command!raw}"}}
MAIN_TOOLS = ["bash", "read_file", "write_file", "finish"]
SHEET_TOOLS = ["inspect_workbook", "write_cells", "write_file", "bash", "finish"]


def _case(**spec: Any) -> dict[str, Any]:
    return spec


def _set(path: str, value: Any) -> dict[str, Any]:
    return {"set_field": {"path": path, "value": value}}


RUN_TOOL = {"set_tool": {"name": "run", "kind": "shell", "description": "Execute a command line in the container.",
                         "parameters": {"type": "object", "properties": {"cmdline": {"type": "string"}},
                                        "required": ["cmdline"]},
                         "template": "{cmdline!raw}", "timeout_s": 120, "output_limit": 20000}}
MISLEADING = "Read-only file viewer for the container. Never use it to run commands or change files."
NO_VERIFY = [_set("routing.verification", None), {"edit_prompt": {"prompt": "system", "old": VERIFY_LINE, "text": ""}}]
WORKER = {"tools": ["read_file", "write_file", "finish"]}
ROUTED = [_set("routing.roles.worker", WORKER),  # roles before the tool that names one, the tool before the role using it
          {"set_tool": {"name": "delegate", "kind": "agent", "role": "worker",
                        "description": "Hand the task to the worker agent; it does the work and reports back.",
                        "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}}},
          _set("routing.roles.lead", {"tools": ["delegate", "finish"]}), _set("routing.start_role", "lead"),
          _set("routing.roles.main", None)]
SHORT = _set("routing.limits.max_turns", 10)  # enough for every task here; keeps a looping episode's traces small
LOOP_DECOY = "the episodes end at the turn limit (10, enough for the work): raising it changes nothing"
CONVENTION_FIX = {"edit_prompt": {"prompt": "system", "section": "House conventions", "text": CONVENTIONS}}

# name: (category, cause, cause_pattern, tasks (affected, keeps), defect edits, fix edits, options)
CASES: dict[str, dict[str, Any]] = {
    "timeout-build": _case(category="timeout", cause="bash's timeout_s (5 s) kills the 8 s index build",
                          pattern=r"time ?out|timed out|timeout_s", affected=["slow-index"], keeps=["greet"],
                          defect=[_set("tools.bash.timeout_s", 5)], fix=[_set("tools.bash.timeout_s", 120)]),
    "timeout-reindex-decoy": _case(category="prompt_convention",
                                  cause="the system prompt omits the house CSV convention (header row) the tests check",
                                  pattern=r"header|convention|csv", affected=["region-report"], keeps=["greet"],
                                  decoy="bash times out on an optional reindex script (harmless)",
                                  defect=[_set("tools.bash.timeout_s", 5)], fix=[CONVENTION_FIX]),
    "truncated-log": _case(category="truncation", cause="bash's output_limit (3000) cuts the FATAL line out of the log",
                          pattern=r"truncat|output_limit|cut", affected=["service-limit"], keeps=["greet"],
                          defect=[_set("tools.bash.output_limit", 3000)], fix=[_set("tools.bash.output_limit", 20000)]),
    "context-budget": _case(category="context", cause="context.max_tokens (2500) drops the log output before it is used",
                           pattern=r"context|max_tokens|dropped", affected=["service-limit"], keeps=["greet"],
                           defect=[_set("routing.context.max_tokens", 2500)],
                           fix=[_set("routing.context.max_tokens", 120000)]),
    "missing-shell": _case(category="missing_tool", cause="there is no bash tool (only `run` with a cmdline argument); "
                          "the model keeps asking for bash", pattern=r"bash|unknown tool|missing tool|no shell",
                          affected=["slow-index", "greet"], keeps=[],
                          decoy=LOOP_DECOY, defect=[SHORT, RUN_TOOL, _set("routing.roles.main.tools", ["run", "read_file", "write_file", "finish"]),
                                  {"remove_tool": {"name": "bash"}}],
                          fix=[_set("routing.roles.main.tools", ["run", "read_file", "write_file", "finish", "bash"])],
                          fix_from_base=["tools.bash"]),
    "misleading-bash": _case(category="tool_description", cause="bash's description says it is a read-only viewer that "
                            "must never run commands", pattern=r"descri|read-only|misleading",
                            affected=["greet", "port-config"], keeps=[],
                            decoy=LOOP_DECOY, defect=[SHORT, {"set_tool": {"name": "bash", "description": MISLEADING}}], fix=[],
                            fix_from_base=["tools.bash.description"]),
    "csv-convention": _case(category="prompt_convention",
                           cause="the system prompt omits the house CSV convention (header row) the tests check",
                           pattern=r"header|convention|csv", affected=["region-report"], keeps=["greet", "slow-index"],
                           defect=[], fix=[CONVENTION_FIX]),
    "turn-limit": _case(category="turn_limit", cause="routing.limits.max_turns (2) ends episodes before the work is done",
                       pattern=r"turn", affected=["slow-index", "service-limit"], keeps=["greet"],
                       defect=[_set("routing.limits.max_turns", 2)], fix=[_set("routing.limits.max_turns", 60)]),
    "quoted-template": _case(category="template", cause="bash's template quotes the whole command ({command} instead "
                            "of {command!raw}), so the shell looks for a program named after it",
                            pattern=r"template|quot|raw|command not found", affected=["greet", "slow-index"], keeps=[],
                            defect=[QUOTED_TEMPLATE], fix=[RAW_TEMPLATE]),
    "worker-without-shell": _case(category="routing", cause="the lead delegates to the worker role, whose tools lack bash",
                                 pattern=r"rout|role|worker|delegat", affected=["greet", "slow-index"], keeps=[],
                                 decoy=LOOP_DECOY, defect=[SHORT, *ROUTED], fix=[_set("routing.roles.worker.tools",
                                                          ["bash", "read_file", "write_file", "finish"])]),
    "no-verification": _case(category="verification", cause="no verification step: the agent never runs the check that "
                            "shows its edit clobbered admin_port", pattern=r"verif|check",
                            affected=["port-config"], keeps=["greet"], defect=NO_VERIFY,
                            fix=[_set("routing.verification", {"prompt": "Before this is graded, verify your work: "
                                                               "check each requirement with a command now."})]),
    "timeout-and-truncation": _case(category="timeout+truncation",
                                   cause="bash's timeout_s (5 s) kills the index build and its output_limit (3000) "
                                         "cuts the FATAL line", pattern=r"time ?out|truncat|output_limit",
                                   affected=["slow-index", "service-limit"], keeps=["greet"],
                                   defect=[_set("tools.bash.timeout_s", 5), _set("tools.bash.output_limit", 3000)],
                                   fix=[_set("tools.bash.timeout_s", 120), _set("tools.bash.output_limit", 20000)]),
    "turns-and-convention": _case(category="turn_limit+prompt_convention",
                                 cause="max_turns (2) is too low and the prompt omits the CSV header convention",
                                 pattern=r"turn|header|convention", affected=["region-report", "slow-index"],
                                 keeps=["greet"], defect=[_set("routing.limits.max_turns", 2)],
                                 fix=[_set("routing.limits.max_turns", 60), CONVENTION_FIX]),
    "template-and-verification": _case(category="template+verification",
                                      cause="bash's template quotes the command and the verification step is gone",
                                      pattern=r"template|quot|verif", affected=["port-config", "greet"], keeps=[],
                                      defect=[QUOTED_TEMPLATE, *NO_VERIFY],
                                      fix=[RAW_TEMPLATE, _set("routing.verification", {
                                          "prompt": "Before this is graded, verify your work: check each requirement "
                                                    "with a command now."})]),
    "truncation-with-keeps": _case(category="truncation", cause="bash's output_limit (3000) cuts the FATAL line",
                                   pattern=r"truncat|output_limit|cut", affected=["service-limit"],
                                   keeps=["greet", "slow-index"],
                                   defect=[_set("tools.bash.output_limit", 3000)],
                                   fix=[_set("tools.bash.output_limit", 20000)]),
    "sheet-turn-limit": _case(category="turn_limit", base="spreadsheet", benchmark="spreadsheetbench", dataset=SHEETS,
                             cause="routing.limits.max_turns (2) ends the episode before the script runs",
                             pattern=r"turn", affected=["sum-by-region"], keeps=[],
                             defect=[_set("routing.limits.max_turns", 2)], fix=[_set("routing.limits.max_turns", 40)]),
    "sheet-missing-write-file": _case(category="missing_tool", base="spreadsheet", benchmark="spreadsheetbench",
                                     dataset=SHEETS, cause="write_file is not offered; the model keeps asking for it",
                                     pattern=r"write_file|missing|unknown tool", affected=["sum-by-region"], keeps=[],
                                     decoy=LOOP_DECOY, defect=[SHORT, _set("routing.roles.main.tools",
                                                  ["inspect_workbook", "write_cells", "bash", "finish"])],
                                     fix=[_set("routing.roles.main.tools", SHEET_TOOLS)]),
    "sheet-write-template": _case(category="template", base="spreadsheet", benchmark="spreadsheetbench", dataset=SHEETS,
                                 cause="write_file's template inserts content raw, so the shell mangles the script",
                                 pattern=r"template|raw|quot|write_file", affected=["sum-by-region"], keeps=[],
                                 defect=[{"set_tool": {"name": "write_file", "template":
                                          "mkdir -p -- \"$(dirname -- {path})\" && printf '%s' {content!raw} > {path}"}}],
                                 fix=[{"set_tool": {"name": "write_file", "template":
                                       "mkdir -p -- \"$(dirname -- {path})\" && printf '%s' {content} > {path}"}}]),
    "sheet-bash-timeout": _case(category="timeout", base="spreadsheet", benchmark="spreadsheetbench", dataset=SHEETS,
                               cause="bash's timeout_s (0.2 s) kills python3 before the workbook is saved",
                               pattern=r"time ?out|timeout_s", affected=["sum-by-region"], keeps=[],
                               defect=[_set("tools.bash.timeout_s", 0.2)], fix=[_set("tools.bash.timeout_s", 120)]),
    "sheet-misleading-bash": _case(category="tool_description", base="spreadsheet", benchmark="spreadsheetbench",
                                  dataset=SHEETS, cause="bash's description says it is read-only and must never run "
                                  "commands", pattern=r"descri|read-only|misleading", affected=["sum-by-region"],
                                  keeps=[], decoy=LOOP_DECOY, defect=[SHORT, {"set_tool": {"name": "bash", "description": MISLEADING}}], fix=[],
                                  fix_from_base=["tools.bash.description"]),
    "routing-and-timeout": _case(category="routing+timeout", cause="the worker role lacks bash, and bash's timeout_s "
                                "(5 s) kills the index build", pattern=r"rout|role|worker|time ?out",
                                affected=["slow-index", "greet"], keeps=[],
                                decoy=LOOP_DECOY, defect=[SHORT, *ROUTED, _set("tools.bash.timeout_s", 5)],
                                fix=[_set("routing.roles.worker.tools", ["bash", "read_file", "write_file", "finish"]),
                                     _set("tools.bash.timeout_s", 120)]),
    "convention-truncation-decoy": _case(category="prompt_convention",
                                        cause="the system prompt omits the house CSV convention (header row)",
                                        pattern=r"header|convention|csv", affected=["region-report"],
                                        keeps=["greet"],
                                        decoy="bash's output_limit (30) truncates listings and the report echo, "
                                              "which the task does not need",
                                        defect=[_set("tools.bash.output_limit", 30)], fix=[CONVENTION_FIX]),
}
