"""Load an inspect-ai task and turn each of its samples into a metaopt Task.

`<module>@<task>`: module is a .py file path or a dotted module name; task is a function in it
decorated with inspect's `@task` (called with no arguments) or a `Task` object. Each sample becomes
a Task with scoring "inspect": its id is the sample id (1, 2, ... when the dataset gives none), its
instruction the sample input (and choices), its environment the sample's or task's sandbox spec
mapped to our Docker sandbox, with no network. The loaded inspect Task is kept in this process
(`loaded()`), because its scorers are code, not data: the trial's verify() step runs them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaopt.benchmarks.inspect_bridge.staging import staged
from metaopt.benchmarks.task import Environment, Solution, Task, TaskLoadError, Verifier
from metaopt.core.errors import InspectLoadError, MissingExtra, TaskFormatError

DEFAULT_IMAGE = "metaopt-base:latest"
DEFAULT_TIMEOUT_S = 600.0
SCORER_TIMEOUT_S = 600.0
# The harness agent's answer is what inspect's answer-checking scorers read (state.output).
ANSWER_NOTE = ("When you are done, give your final answer as the last thing in your finish summary "
               "(or your last message): it is what gets checked.")


@dataclass
class Loaded:
    """An inspect Task as loaded in this process, its samples by our task id, its source dir."""

    task: Any
    samples: dict[str, Any]
    source_dir: Path


_cache: dict[str, Loaded] = {}
_lock = threading.Lock()


def loaded(spec: str) -> Loaded:
    """The inspect task behind `inspect:<spec>` tasks, loading it if this process has not."""
    with _lock:
        if spec not in _cache:
            _cache[spec] = _load(spec)
        return _cache[spec]


def load_tasks(spec: str) -> list[Task | TaskLoadError]:
    """Every sample of `<module>@<task>` as a Task (a TaskLoadError for one we cannot run).
    Raises InspectLoadError for an unimportable module or unknown task."""
    with _lock:
        _cache[spec] = _load(spec)
        lt = _cache[spec]
    name = f"inspect:{spec}"
    return [_to_task(name, lt, sid, sample) for sid, sample in lt.samples.items()]


def _load(spec: str) -> Loaded:
    module_ref, sep, task_name = spec.rpartition("@")
    if not sep or not module_ref or not task_name:
        raise InspectLoadError(f"--benchmark inspect:{spec}: expected inspect:<module or file.py>@<task>")
    _check_exists(module_ref, spec)  # before importing inspect-ai, which takes seconds
    try:
        from inspect_ai import Task as InspectTask
    except ImportError:
        raise MissingExtra("inspect benchmarks", "inspect", "inspect-ai") from None
    module, source_dir = _import(module_ref, spec)
    obj = getattr(module, task_name, None)
    if obj is None:
        known = [k for k, v in vars(module).items() if _is_task_fn(v) or isinstance(v, InspectTask)]
        raise InspectLoadError(f"--benchmark inspect:{spec}: {module_ref} has no task '{task_name}' "
                               f"(tasks: {', '.join(known) or 'none'})")
    try:
        task = obj if isinstance(obj, InspectTask) else obj()
    except Exception as e:  # noqa: BLE001 - the task author's code: report it, one line
        raise InspectLoadError(f"--benchmark inspect:{spec}: {task_name}() raised {type(e).__name__}: {e}") from None
    if not isinstance(task, InspectTask):
        raise InspectLoadError(f"--benchmark inspect:{spec}: {task_name} is not an inspect Task or @task function")
    samples: dict[str, Any] = {}
    for i, sample in enumerate(task.dataset, start=1):
        sid = str(sample.id if sample.id is not None else i)
        if sid in samples:
            raise InspectLoadError(f"--benchmark inspect:{spec}: two samples have the id '{sid}'")
        samples[sid] = sample
    return Loaded(task, samples, source_dir)


def _is_file_ref(ref: str) -> bool:
    return ref.endswith(".py") or Path(ref).is_file()


def _check_exists(ref: str, spec: str) -> None:
    if _is_file_ref(ref):
        if not Path(ref).is_file():
            raise InspectLoadError(f"--benchmark inspect:{spec}: {ref} does not exist")
        return
    try:
        found = importlib.util.find_spec(ref)
    except Exception as e:  # noqa: BLE001 - a missing parent package, or one that fails to import
        raise InspectLoadError(f"--benchmark inspect:{spec}: cannot import {ref}: {type(e).__name__}: {e}") from None
    if found is None:
        raise InspectLoadError(f"--benchmark inspect:{spec}: cannot import {ref}: no module named '{ref}'")


def _import(ref: str, spec: str) -> tuple[Any, Path]:
    path = Path(ref)
    try:
        if _is_file_ref(ref):
            name = f"metaopt_inspect_{abs(hash(str(path.resolve())))}"
            mod_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(mod_spec)  # type: ignore[arg-type]
            sys.modules[name] = module
            mod_spec.loader.exec_module(module)  # type: ignore[union-attr]
            return module, path.resolve().parent
        module = importlib.import_module(ref)
        return module, Path(module.__file__ or ".").resolve().parent
    except InspectLoadError:
        raise
    except Exception as e:  # noqa: BLE001 - any import-time failure of the user's module is bad input
        raise InspectLoadError(f"--benchmark inspect:{spec}: cannot import {ref}: {type(e).__name__}: {e}") from None


def _is_task_fn(v: Any) -> bool:
    try:
        from inspect_ai._util.registry import is_registry_object

        return callable(v) and is_registry_object(v, type="task")
    except Exception:  # noqa: BLE001 - registry internals moved: listing names is only a courtesy
        return False


def _to_task(name: str, lt: Loaded, sid: str, sample: Any) -> Task | TaskLoadError:
    def bad(why: str) -> TaskLoadError:
        return TaskLoadError(id=sid, source_dir=lt.source_dir, error=f"{name} sample {sid}: {why}")

    if not lt.task.scorer:
        return bad("the task has no scorer")
    try:
        env = _environment(sample.sandbox or lt.task.sandbox, lt.source_dir)
        if sample.files or sample.setup:
            env = staged(env, sample.files, sample.setup)
    except (OSError, ValueError) as e:
        return bad(str(e))
    meta = sample.metadata or {}
    solution = Solution(command=meta["solution"]) if isinstance(meta.get("solution"), str) else None
    timeout = float(lt.task.time_limit or lt.task.working_limit or DEFAULT_TIMEOUT_S)
    return Task(
        id=sid, benchmark=name, format="inspect", source_dir=lt.source_dir,
        instruction=instruction(sample), environment=env, agent_timeout_s=timeout,
        # Nothing is copied in and no command runs: the task's own inspect scorers are the verifier.
        verifier=Verifier(files=[], command="inspect scorers", timeout_s=SCORER_TIMEOUT_S),
        scoring="inspect", solution=solution, network=False,
        metadata={"inspect_task": lt.task.name, "inspect_sample_id": sid},
    )


def instruction(sample: Any) -> str:
    """The sample input as text (messages joined), its choices lettered, and where the answer goes."""
    if isinstance(sample.input, str):
        text = sample.input
    else:
        text = "\n\n".join(m.text for m in sample.input if m.role in ("system", "user") and m.text)
    if sample.choices:
        text += "\n\n" + "\n".join(f"{chr(65 + i)}) {c}" for i, c in enumerate(sample.choices))
    return f"{text}\n\n{ANSWER_NOTE}"


def _environment(spec: Any, source_dir: Path) -> Environment:
    """inspect sandbox spec -> our Docker environment. docker / metaopt / local / none all run in
    our Docker sandbox; a Dockerfile (given, or found next to the task as inspect's docker sandbox
    would) is built; a compose file or another sandbox type cannot be run."""
    kind = spec.type if spec is not None else None
    config = spec.config if spec is not None else None
    if kind not in (None, "docker", "metaopt", "local"):
        raise TaskFormatError(f"sandbox type '{kind}' cannot run in metaopt's Docker sandbox")
    if config is not None and not isinstance(config, str):
        raise TaskFormatError(f"sandbox config {type(config).__name__} is not supported (give a Dockerfile or an image)")
    if config is None and kind == "docker" and (source_dir / "Dockerfile").is_file():
        config = "Dockerfile"
    if config is None:
        return Environment(image=DEFAULT_IMAGE)
    path = source_dir / config
    if "compose" in Path(config).name or path.suffix in (".yaml", ".yml"):
        raise TaskFormatError(f"compose files ({config}) are not supported: give a Dockerfile")
    if path.is_file():
        return Environment(context_dir=path.parent, dockerfile=path.name)
    if kind == "metaopt":
        return Environment(image=config)
    raise TaskFormatError(f"sandbox config {config} is not a file in {source_dir}")
