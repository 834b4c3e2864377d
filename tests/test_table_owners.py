"""One owner per table. Every table of the store has exactly one owner module, registered in
metaopt.traces.migrations.SCHEMAS (the one declared list: add new owners there): it holds the
table's DDL (its part of the named migrations), its record type (`class X(Record, table=...)`)
and every write to it (INSERT / UPDATE / DELETE / CREATE / ALTER / an appender). SQL text naming
a table (reads too) appears only in that table's owner module and the read-only modules its owner
declares (`Schema.readers`): a reader of one owner's tables may not read another's undeclared. Docstrings are prose and are not scanned; neither are the files copied into
sandboxes (they have tables of their own). Writing a record through the generic `Store.insert`
is allowed anywhere: its SQL is built by the store from the owner's record type."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from metaopt.traces.migrations import SCHEMAS, schemas

ROOT = Path(__file__).parents[1]
STANDALONE = ("metaopt/benchmarks/samples", "metaopt/benchmarks/gptpretrain/files", "metaopt/export/files",
              "metaopt/benchmarks/spreadsheet/compare.py", "metaopt/benchmarks/spreadsheet/evaluate.py")

SQL = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE|DELETE\s+FROM|CREATE\s+TABLE|ALTER\s+TABLE|DROP\s+TABLE|DESCRIBE)\b")
WRITE = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM|CREATE\s+TABLE(?:\s+IF\s+NOT\s+EXISTS)?|ALTER\s+TABLE"
                   r"|DROP\s+TABLE(?:\s+IF\s+EXISTS)?)\s+(\w+)")


def path_of(module: str) -> str:
    return module.replace(".", "/") + ".py"


def owners() -> tuple[dict[str, str], dict[str, set[str]]]:
    """(table -> owner file, table -> files allowed SQL over it: its owner and the readers its
    owner declares), from the registered schemas."""
    table_owner: dict[str, str] = {}
    allowed: dict[str, set[str]] = {}
    for name, schema in schemas().items():
        owner = path_of(SCHEMAS.target(name).partition(":")[0])
        for t in schema.tables:
            assert t not in table_owner, f"table {t} has two owners: {table_owner[t]} and {owner}"
            table_owner[t] = owner
            allowed[t] = {owner, *(path_of(r) for r in schema.readers)}
    return table_owner, allowed


def strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal but docstrings; an f-string's fields read as {}."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    inside = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            out.append((n.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs | inside:
            out.append((n.lineno, n.value))
    return out


def check(files: dict[str, str]) -> tuple[list[str], dict[str, list[str]]]:
    """(violations as "file:line: why", table -> files defining its record type) for `files`
    (repository-relative path -> source)."""
    table_owner, allowed = owners()
    # a table is read where a FROM, JOIN or DESCRIBE names it (a column may share a table's name)
    named = re.compile(r"\b(?:FROM|JOIN|DESCRIBE)\s+(" + "|".join(map(re.escape, table_owner)) + r")\b")
    bad: list[str] = []
    records: dict[str, list[str]] = {}
    for f, src in sorted(files.items()):
        tree = ast.parse(src, f)
        for line, text in strings(tree):
            if not SQL.search(text):
                continue
            tables = set(named.findall(text))
            for verb, target in WRITE.findall(text):
                if target.isupper():  # ON CONFLICT ... DO UPDATE SET
                    continue
                verb = " ".join(verb.split()[:2])
                if target not in table_owner:
                    bad.append(f"{f}:{line}: {verb} {target}: no registered owner declares this table")
                elif table_owner[target] != f:
                    bad.append(f"{f}:{line}: {verb} {target}: only its owner {table_owner[target]} writes it")
                tables.discard(target)
            outside = sorted(t for t in tables if f not in allowed[t])
            if outside:
                bad.append(f"{f}:{line}: SQL over {', '.join(outside)} outside its owner and declared readers")
        for n in ast.walk(tree):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "appender"
                    and n.args and isinstance(n.args[0], ast.Constant) and table_owner.get(n.args[0].value) != f):
                bad.append(f"{f}:{n.lineno}: appender({n.args[0].value!r}): only the table's owner writes it")
            if isinstance(n, ast.ClassDef):
                for kw in n.keywords:
                    if kw.arg == "table" and isinstance(kw.value, ast.Constant):
                        records.setdefault(kw.value.value, []).append(f)
                        if table_owner.get(kw.value.value) != f:
                            bad.append(f"{f}:{n.lineno}: record {n.name} of table {kw.value.value!r} outside its "
                                       f"owner {table_owner.get(kw.value.value, '(none registered)')}")
    return sorted(bad, key=lambda b: (b.split(":")[0], int(b.split(":")[1]))), records


def package_files() -> dict[str, str]:
    out = {}
    for p in sorted((ROOT / "metaopt").rglob("*.py")):
        rel = str(p.relative_to(ROOT))
        if not rel.startswith(STANDALONE):
            out[rel] = p.read_text()
    return out


def test_every_table_has_one_owner_holding_its_ddl_record_and_writes():
    bad, records = check(package_files())
    assert bad == [], "\n".join(bad)
    table_owner, _ = owners()
    assert {t: records.get(t) for t in table_owner} == {t: [o] for t, o in table_owner.items()}


def test_every_declared_table_is_created_by_its_owners_migrations():
    for name, schema in schemas().items():
        created = {m.group(2) for _, sql in schema.migrations for m in WRITE.finditer(sql) if m.group(1).startswith("CREATE")}
        altered = {m.group(2) for _, sql in schema.migrations for m in WRITE.finditer(sql) if m.group(1).startswith("ALTER")}
        assert created <= set(schema.tables) and altered <= set(schema.tables), name
        assert created == set(schema.tables) - {"schema_migrations"}, name


def test_the_check_names_a_planted_violation():
    planted = ('"""A module that is no owner."""\n'
               'from metaopt.traces.records import Record\n\n\n'
               'class Row(Record, table="candidates"):\n    x: int\n\n\n'
               'def f(store, eid):\n'
               '    """SELECT * FROM trials in a docstring is prose."""\n'
               '    store.rows(f"SELECT {eid} FROM trials")\n'
               '    store.con.execute("UPDATE candidates SET status = ? WHERE candidate_id = ?", [1, 2])\n'
               '    store.con.execute("CREATE TABLE clusters (x INT)")\n'
               '    store.con.cursor().appender("spans")\n')
    bad, _ = check({"metaopt/meta_agent/planted.py": planted})
    f = "metaopt/meta_agent/planted.py"
    assert bad == [
        f"{f}:5: record Row of table 'candidates' outside its owner metaopt/meta_agent/records.py",
        f"{f}:11: SQL over trials outside its owner and declared readers",
        f"{f}:12: UPDATE candidates: only its owner metaopt/meta_agent/records.py writes it",
        f"{f}:13: CREATE TABLE clusters: no registered owner declares this table",
        f"{f}:14: appender('spans'): only the table's owner writes it",
    ]
    ok = 'def g(store):\n    return store.rows("SELECT count(*) AS n FROM trials")\n'
    assert check({"metaopt/traces/queries.py": ok})[0] == []
    # readers are per table: a declared reader of trials may not read candidates undeclared
    other = 'def g(store):\n    return store.rows("SELECT c.status FROM trials JOIN candidates c USING (candidate_id)")\n'
    assert check({"metaopt/traces/queries.py": other})[0] == [
        "metaopt/traces/queries.py:2: SQL over candidates outside its owner and declared readers"]
    column = 'def g(store):\n    return store.rows("SELECT messages, spans FROM level2_sessions")\n'
    assert check({"metaopt/explorer/mechanisms.py": column})[0] == []  # columns that share a table's name


def test_every_declared_reader_reads_its_owners_tables():
    """A reader an owner declares exists and holds SQL over that owner's tables: the lists say who
    reads what, so a reader that moved or stopped reading is taken off them."""
    files = package_files()
    read = re.compile(r"\b(?:FROM|JOIN|DESCRIBE)\s+(\w+)")
    for name, schema in schemas().items():
        for reader in schema.readers:
            f = path_of(reader)
            assert f in files, f"{name}: declared reader {reader} is no module"
            tables = {t for _, text in strings(ast.parse(files[f])) if SQL.search(text) for t in read.findall(text)}
            assert tables & set(schema.tables), f"{name}: declared reader {reader} reads none of {schema.tables}"


def test_each_record_has_exactly_its_tables_columns(tmp_path):
    from metaopt.traces.records import Record
    from metaopt.traces.store import Store

    schemas()
    found, stack = {}, list(Record.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "table" in cls.__dict__:
            found[cls.table] = cls
    table_owner, _ = owners()
    with Store(tmp_path / "s.duckdb") as store:
        assert {t: sorted(store.columns(t)) for t in table_owner} == {t: sorted(found[t].columns()) for t in table_owner}


def test_runs_spans_and_messages_read_back_as_their_records(tmp_path, monkeypatch):
    import json

    from metaopt.traces.exporter import DuckDBSpanExporter
    from metaopt.traces.otel import OTLP_ENV, get_tracer, make_tracer_provider
    from metaopt.traces.store import Store
    from metaopt.traces.tables import MessageRecord, RunRecord, SpanRecord

    for k in OTLP_ENV:
        monkeypatch.delenv(k, raising=False)
    with Store(tmp_path / "t.duckdb") as store:
        store.begin_run("r1", benchmark="b", agent="oracle", dataset=None, args={"n": 1})
        store.end_run("r1", "finished")
        store.end_run("r1", "failed", unless_finished=True)  # a finished run stays finished
        provider = make_tracer_provider(exporters=[DuckDBSpanExporter(store, batch_rows=1)])
        msgs = [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
        with get_tracer(provider).start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "metaopt.trial.id": "r1/t/0", "gen_ai.input.messages": json.dumps(msgs),
                "gen_ai.response.finish_reasons": ["stop"]}):
            pass
        provider.shutdown()
        [run] = store.select(RunRecord)
        [span] = store.select(SpanRecord)
        [msg] = store.select(MessageRecord)
        store.insert(msg.model_copy(update={"span_id": "s2", "part": {"type": "text", "content": "again"}}))
        again = store.select(MessageRecord, "span_id = ?", ["s2"])
    assert (run.status, run.args) == ("finished", {"n": 1})
    assert (span.operation_name, span.trial_id, span.finish_reasons) == ("chat", "r1/t/0", ["stop"])
    assert span.attributes is not None and span.attributes["gen_ai.operation.name"] == "chat"
    assert (msg.direction, msg.role, msg.text, msg.part) == ("input", "user", "hi", {"type": "text", "content": "hi"})
    assert again[0].part == {"type": "text", "content": "again"}
