"""The GPT-pretraining task (karpathy/autoresearch style) with an evaluator enforced in code.

The agent edits /app/train.py to lower validation bits per byte within a fixed training-time
budget. `load_tasks(data_dir)` builds the one Task for this machine (see build.py for the
settings), `verify_val_bpb` scores it (see verify.py); the in-sandbox files are in files/.
"""

from __future__ import annotations

from pathlib import Path

from metaopt.core.errors import MissingExtra


def load_tasks(data_dir: Path | None = None) -> list:
    """[the Task] for `data_dir` (text / parquet) or the offline corpus. Raises ValueError
    (corpus.DataError included) with a one-line message, MissingExtra without numpy."""
    try:
        from metaopt.benchmarks.gptpretrain.build import build_task
    except ImportError as e:
        raise MissingExtra("benchmark 'gptpretrain'", "pretrain", e.name) from None
    return [build_task(data_dir)]
