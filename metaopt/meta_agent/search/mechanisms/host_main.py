"""The mechanism host: runs ONE mechanism module in its own process (a sandboxed child process or
a container), never in the optimizer's. Standalone (standard library only): it is copied into
containers as is.

    python3 -I -S host_main.py MODULE.py          then JSON lines on stdin / stdout

Start-up: the module's source is read and compiled, the allowed modules are imported, a call
tracer (which of the module's functions ran) and an audit hook are installed, and only then is
the module executed, with builtins that lack open/exec/eval/__import__ and friends and an import
function that hands out only the allowed modules. From then on the audit hook refuses opening
files, sockets, processes, os/shutil/ctypes calls and frame introspection for everything in the
process, the host included (it only needs the stdin/stdout it already holds). This runtime
guard is defence in depth behind the static checks; the boundary is the process (no network
namespace, unprivileged user, resource limits) or the container it runs in.

First line out: {"ready": true, "info": {...}} or {"ready": false, "error": "..."}.
Requests: {"id": N, "hook": NAME, "args": [...]}; for select_parent the second argument is
{"seed": S} and the hook gets random.Random(S). Special hooks: "__reset__" (a new instance, as
for load_state_dict after a restart), "__coverage__" (qualified names of the module's functions
that ran). Replies: {"id": N, "ok": true, "value": V} or {"id": N, "ok": false, "error": "..."}.
"""

import builtins
import json
import sys

ALLOWED = ("math", "random", "statistics", "collections", "collections.abc", "itertools", "functools",
           "heapq", "bisect", "re", "json", "dataclasses", "typing", "enum", "string", "textwrap",
           "difflib", "hashlib", "operator", "copy", "fractions", "decimal", "numbers", "abc", "__future__")
REMOVED = ("open", "exec", "eval", "compile", "globals", "locals", "vars", "getattr", "setattr", "delattr",
           "input", "breakpoint", "help", "exit", "quit", "memoryview", "__build_class__")
# Audit events refused once the module runs (a name ending in "." refuses the whole family). exec and
# compile stay allowed: dataclasses and the like use them internally, and the module itself has no
# exec, eval or compile to call.
BLOCKED = ("open", "os.", "subprocess.", "socket.", "shutil.", "ctypes.", "sys._getframe", "sys.settrace",
           "sys.setprofile", "sys.addaudithook", "sys._current_frames", "marshal.", "pickle.", "urllib.", "http.",
           "ftplib.", "smtplib.", "import", "code.__new__", "function.__new__", "cpython.", "builtins.input",
           "webbrowser.", "glob.", "fcntl.", "resource.", "mmap.", "signal.", "syslog.", "sqlite3.", "_thread.",
           "threading.", "gc.", "time.sleep")
HOOKS = ("on_result", "guidance", "select_parent", "filter", "state_dict", "load_state_dict")
FILENAME = "<mechanism>"

_guard = {"on": False, "exec_once": False}
_ran: set = set()
_out = sys.stdout


def _audit(event, args):
    if not _guard["on"]:
        return
    if event == "exec" and _guard["exec_once"]:
        _guard["exec_once"] = False  # the host executing the module's code, once
        return
    if event == "import" and args and str(args[0]).split(".")[0] in _roots():
        return
    if any(event == b or (b.endswith(".") and event.startswith(b)) for b in BLOCKED):
        raise PermissionError(f"mechanism host: '{event}' is not allowed")


def _roots():
    return {m.split(".")[0] for m in ALLOWED}


def _tracer(frame, event, arg):
    code = frame.f_code
    if event == "call" and code.co_filename == FILENAME:
        _ran.add(getattr(code, "co_qualname", code.co_name))


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or name not in ALLOWED or name not in sys.modules:
        raise ImportError(f"import of '{name}' is not allowed (allowed: {', '.join(ALLOWED)})")
    module = sys.modules[name]
    if fromlist:
        return module
    return sys.modules[name.split(".")[0]]


def _print(*args, sep=" ", end="\n", **_):
    sys.stderr.write(sep.join(str(a) for a in args) + end)


def _send(obj):
    _out.write(json.dumps(obj) + "\n")
    _out.flush()


def _load(path):
    with builtins.open(path, encoding="utf-8") as f:  # before the guard: the one file we read
        source = f.read()
    code = builtins.compile(source, FILENAME, "exec")
    for name in ALLOWED:
        __import__(name)
    import random  # noqa: F401 (select_parent's rng)

    safe = {k: v for k, v in vars(builtins).items() if k not in REMOVED}
    safe["__import__"] = _guarded_import
    safe["__build_class__"] = builtins.__build_class__  # class statements need it
    safe["print"] = _print  # stdout carries the protocol: a debugging print must not break it
    namespace = {"__name__": "<mechanism>", "__builtins__": safe}
    sys.settrace(_tracer)
    sys.addaudithook(_audit)
    _guard["on"], _guard["exec_once"] = True, True
    builtins.exec(code, namespace)  # noqa: S102 - running the mechanism's code, jailed, is this host's job
    cls = namespace.get("Mechanism")
    if not isinstance(cls, type):
        raise TypeError("the module defines no class named Mechanism")
    return cls


def _info(cls):
    return {"name": getattr(cls, "name", None), "hooks": [h for h in HOOKS if callable(cls.__dict__.get(h))]}


def _call(obj, hook, args):
    import random

    fn = getattr(obj, hook, None)
    if not callable(fn):
        raise AttributeError(f"the mechanism has no {hook}()")  # noqa: TRY004 - a missing hook, reported as such
    if hook == "select_parent":
        args = [args[0], random.Random(int(args[1]["seed"]))]
    return fn(*args)


def main():
    try:
        cls = _load(sys.argv[1])
        obj = cls()
    except BaseException as e:  # noqa: BLE001 - reported, then the host ends
        _send({"ready": False, "error": f"{type(e).__name__}: {e}"[:2000]})
        return
    _send({"ready": True, "info": _info(cls)})
    for line in sys.stdin:
        try:
            req = json.loads(line)
            rid, hook = req.get("id"), req.get("hook")
        except ValueError:
            continue
        try:
            if hook == "__reset__":
                obj, value = cls(), None
            elif hook == "__coverage__":
                value = sorted(_ran)
            elif hook not in HOOKS:
                raise ValueError(f"unknown hook {hook!r}")
            else:
                value = _call(obj, hook, req.get("args") or [])
            text = json.dumps({"id": rid, "ok": True, "value": value})
        except BaseException as e:  # noqa: BLE001 - a raising hook is a reply, not the host's end
            text = json.dumps({"id": rid, "ok": False, "error": f"{type(e).__name__}: {e}"[:2000]})
        _out.write(text + "\n")
        _out.flush()


if __name__ == "__main__":
    main()
