"""meta-bench: measure the meta-agent itself on cases with planted harness defects.

A case (meta_bench.case) holds a defective harness, recorded traces of a task model running it
and what counts as fixed; `run_bench` (meta_bench.bench) runs a meta-model once per case and
judges each proposal by replaying the affected tasks (meta_bench.check), never by its text.
"""
