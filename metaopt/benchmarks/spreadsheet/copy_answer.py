"""Oracle for SpreadsheetBench tasks without a solution script of their own (upstream data):
`python3 solve.py INPUT OUTPUT` copies the answer of the case INPUT belongs to (its leading
`{n}_`) from /oracle/answers to OUTPUT. Harbor's adapter uses the same oracle; it checks the
environment and the scorer, not the task."""

import glob
import os
import shutil
import sys

case = os.path.basename(sys.argv[1]).split("_", 1)[0]
found = sorted(glob.glob(f"/oracle/answers/{case}_*"))
if not found:
    sys.exit(f"no oracle answer for case {case}")
os.makedirs(os.path.dirname(os.path.abspath(sys.argv[2])), exist_ok=True)
shutil.copyfile(found[0], sys.argv[2])
