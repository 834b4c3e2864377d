"""Named, ordered schema migrations. Append new ones; never edit or reorder applied ones."""

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_runs_and_trials",
        """
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY,
            benchmark VARCHAR NOT NULL,
            agent VARCHAR NOT NULL,          -- oracle | nop | harness@model
            dataset VARCHAR,
            args JSON,
            started_at TIMESTAMP NOT NULL,
            finished_at TIMESTAMP,
            status VARCHAR NOT NULL          -- running | finished | interrupted | failed
        );
        CREATE TABLE trials (
            trial_id VARCHAR PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            task_id VARCHAR NOT NULL,
            attempt INTEGER NOT NULL,        -- 0-based trial index for this task in the run
            agent VARCHAR NOT NULL,
            score DOUBLE,                    -- NULL when status = error: errors are not zeros
            status VARCHAR NOT NULL,         -- passed | failed | error | timeout
            failure_mode VARCHAR,            -- agent_timeout | test_timeout | tests_failed | parse_error | infra_error | ...
            error VARCHAR,
            tests JSON,                      -- {test id: passed | failed}
            rewards JSON,                    -- Harbor reward.json / reward.txt values
            test_output VARCHAR,
            verifier_exit_code INTEGER,
            agent_timed_out BOOLEAN,
            agent_log VARCHAR,
            duration_s DOUBLE,
            agent_duration_s DOUBLE,
            verifier_duration_s DOUBLE,
            image VARCHAR,
            timeout_multiplier DOUBLE,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cost_usd DOUBLE,
            trace_id VARCHAR,
            hardware JSON,
            started_at TIMESTAMP,
            finished_at TIMESTAMP
        );
        """,
    ),
]
