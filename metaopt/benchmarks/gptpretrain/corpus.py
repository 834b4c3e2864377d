"""Documents for the pretraining task: from a data dir, or an offline corpus every machine has.

A *document* is a chunk of about 8 KB of text cut at a line boundary, named `file#n` (or
`file#row.n` for a parquet row). Each goes to one split by a hash of its name, so the split of a
document never depends on which other documents exist: about 5% validation (hidden from the
agent), 5% dev (the agent's own yardstick), the rest train.

- `--dataset DIR`: every `*.txt`, `*.md`, `*.text` file and every `*.parquet` shard with a
  `text` column under DIR (recursively, sorted by path). Nothing readable there is a DataError.
- no dataset: the `.py` files of this Python's standard library (English docstrings and code),
  sorted by path, then `/usr/share/common-licenses`. Deterministic for a given Python build; its
  hash is part of every cache key, so a different corpus never reuses another's baseline.
"""

from __future__ import annotations

import sysconfig
import zlib
from collections.abc import Iterator
from pathlib import Path

from metaopt.core.errors import DataError, MissingExtra

CHUNK = 8192
TEXT_SUFFIXES = {".txt", ".md", ".text"}
LICENSES = Path("/usr/share/common-licenses")


def split_of(name: str) -> str:
    """'val' | 'dev' | 'train', fixed by the document's name."""
    h = zlib.crc32(name.encode()) % 100
    return "val" if h < 5 else "dev" if h < 10 else "train"


def chunks(name: str, text: str) -> Iterator[tuple[str, str]]:
    start, n = 0, 0
    while start < len(text):
        end = text.find("\n", start + CHUNK)
        end = len(text) if end < 0 else end + 1
        piece = text[start:end]
        if piece.strip():
            yield f"{name}#{n}", piece
        start, n = end, n + 1


def documents(data_dir: Path | None, max_bytes: int) -> list[tuple[str, str]]:
    """(name, text) pairs, at most about `max_bytes` of text in all. Raises DataError."""
    source = _from_dir(Path(data_dir)) if data_dir is not None else _offline()
    out, total = [], 0
    for name, text in source:
        for doc in chunks(name, text):
            out.append(doc)
            total += len(doc[1])
        if total >= max_bytes:
            break
    if not out:
        where = f"--dataset {data_dir}" if data_dir is not None else "the offline corpus"
        raise DataError(f"{where}: no text found (looked for *.txt, *.md, *.text files and *.parquet "
                        f"shards with a 'text' column)")
    return out


def _from_dir(root: Path) -> Iterator[tuple[str, str]]:
    if not root.is_dir():
        raise DataError(f"--dataset {root}: not a directory")
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.suffix in TEXT_SUFFIXES and path.is_file():
            yield rel, path.read_text(errors="replace")
        elif path.suffix == ".parquet" and path.is_file():
            yield from _parquet(path, rel)


def _parquet(path: Path, rel: str) -> Iterator[tuple[str, str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtra(f"--dataset: {rel} is parquet and reading it", "pretrain", "pyarrow") from None
    try:
        table = pq.read_table(path, columns=["text"])
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a missing column or a bad file
        raise DataError(f"--dataset: {rel}: cannot read a 'text' column ({str(e).splitlines()[0]})") from None
    for i, value in enumerate(table.column("text").to_pylist()):
        if isinstance(value, str) and value.strip():
            yield f"{rel}#{i}", value


def _offline() -> Iterator[tuple[str, str]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "dist-packages", "test", "tests", "idlelib", "lib2to3", "__pycache__"}
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib)
        if not skip & set(rel.parts):
            yield f"stdlib/{rel}", path.read_text(errors="replace")
    if LICENSES.is_dir():
        for path in sorted(LICENSES.iterdir()):
            if path.is_file():
                yield f"licenses/{path.name}", path.read_text(errors="replace")
