"""meta-bench with write_revision's hypothesis check off: the check's ablation (perf/RESULTS.md).

    python -m perf.meta_bench_ablation --meta-model local/qwen2.5-coder-1.5b --split heldout --json

Exactly `metaopt bench meta ARGS` (the same command line, the same store rows), with
`proposers/effects.ENABLED` switched off in this process first.
"""

import sys

from metaopt.cli import main
from metaopt.meta_agent.proposers import effects

if __name__ == "__main__":
    effects.ENABLED = False
    sys.argv = ["metaopt", "bench", "meta", *sys.argv[1:]]
    main()
