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
    (
        "0002_spans_and_messages",
        # Spans join trials by trace_id (trials.trace_id) or trial_id. No PRIMARY KEY and no
        # indexes: an ART index costs the appender more than it saves at our sizes, where zone
        # maps on the append-ordered trace_id/trial_id columns already prune well.
        """
        CREATE TABLE spans (
            trace_id VARCHAR NOT NULL,       -- 32 hex
            span_id VARCHAR NOT NULL,        -- 16 hex
            parent_span_id VARCHAR,          -- NULL for a root span
            name VARCHAR NOT NULL,
            kind VARCHAR,                    -- INTERNAL | CLIENT | SERVER | PRODUCER | CONSUMER
            start_ns BIGINT,
            end_ns BIGINT,
            duration_ms DOUBLE,
            status_code VARCHAR,             -- UNSET | OK | ERROR
            status_message VARCHAR,
            service_name VARCHAR,
            scope_name VARCHAR,
            run_id VARCHAR,                  -- metaopt.run.id
            trial_id VARCHAR,                -- metaopt.trial.id
            task_id VARCHAR,                 -- metaopt.task.id
            harness_version VARCHAR,         -- gen_ai.agent.version
            operation_name VARCHAR,          -- invoke_agent | chat | execute_tool | ...
            provider VARCHAR,
            request_model VARCHAR,
            response_model VARCHAR,
            agent_name VARCHAR,
            conversation_id VARCHAR,
            tool_name VARCHAR,
            tool_call_id VARCHAR,
            input_tokens BIGINT,             -- includes cached tokens
            output_tokens BIGINT,            -- includes reasoning tokens
            reasoning_tokens BIGINT,
            cache_read_tokens BIGINT,
            cache_write_tokens BIGINT,
            finish_reasons VARCHAR[],
            error_type VARCHAR,
            cost_usd DOUBLE,                 -- metaopt.cost_usd; NULL when unknown
            attributes JSON,                 -- every attribute (hot ones too) but the content, which is in messages
            resource JSON,
            events JSON                      -- [{name, ts_ns, attributes}]
        );
        CREATE TABLE messages (
            trace_id VARCHAR NOT NULL,
            span_id VARCHAR NOT NULL,
            trial_id VARCHAR,
            direction VARCHAR NOT NULL,      -- input | output | system | tool_call | tool_result
            idx INTEGER,                     -- position in the conversation (system excluded)
            role VARCHAR,
            part_idx INTEGER,
            part_type VARCHAR,               -- text | reasoning | tool_call | tool_call_response | ...
            text VARCHAR,                    -- searchable text of the part (arguments as JSON)
            tool_call_id VARCHAR,
            tool_name VARCHAR,
            json JSON                        -- the part as emitted
        );
        """,
    ),
    (
        "0003_experiment_ledger",
        """
        CREATE TABLE experiments (
            experiment_id VARCHAR PRIMARY KEY,
            benchmark VARCHAR NOT NULL,
            config JSON NOT NULL,            -- every option the run was started with
            splits JSON NOT NULL,            -- {train: [task ids], validation: [...], test: [...]}
            status VARCHAR NOT NULL,         -- running | finished | interrupted | failed
            started_at TIMESTAMP NOT NULL,
            finished_at TIMESTAMP,
            result JSON                      -- the final report (the --json object)
        );
        CREATE TABLE candidates (
            candidate_id VARCHAR PRIMARY KEY,
            experiment_id VARCHAR NOT NULL,
            parent_id VARCHAR,
            iteration INTEGER NOT NULL,      -- 0 = the starting harness
            status VARCHAR NOT NULL,         -- baseline | pending | accepted | rejected | inconclusive | invalid
            proposer VARCHAR,
            rationale VARCHAR,
            evidence JSON,                   -- trial ids / span ids the proposal cites
            diff VARCHAR,                    -- unified diff against the parent's harness files
            harness JSON NOT NULL,           -- full snapshot of the harness
            harness_hash VARCHAR NOT NULL,
            status_reason VARCHAR,
            created_at TIMESTAMP NOT NULL
        );
        CREATE TABLE gate_decisions (
            experiment_id VARCHAR NOT NULL,
            candidate_id VARCHAR NOT NULL,
            parent_id VARCHAR,
            stage VARCHAR NOT NULL,          -- smoke | screen | validation
            outcome VARCHAR NOT NULL,        -- pass | fail | accept | reject | inconclusive
            delta DOUBLE,
            se DOUBLE,
            threshold DOUBLE,
            n_tasks INTEGER,
            coverage DOUBLE,
            reason VARCHAR NOT NULL,
            rule VARCHAR NOT NULL,
            details JSON,
            decided_at TIMESTAMP NOT NULL
        );
        CREATE TABLE budget_ledger (
            experiment_id VARCHAR NOT NULL,
            candidate_id VARCHAR,
            kind VARCHAR NOT NULL,           -- task | meta
            ref VARCHAR,                     -- trial id, or the proposal it paid for
            usd DOUBLE,                      -- NULL when the price is unknown
            input_tokens BIGINT,
            output_tokens BIGINT,
            recorded_at TIMESTAMP NOT NULL
        );
        ALTER TABLE trials ADD COLUMN experiment_id VARCHAR;
        ALTER TABLE trials ADD COLUMN candidate_id VARCHAR;
        ALTER TABLE trials ADD COLUMN split VARCHAR;
        """,
    ),
    (
        "0004_stats_alpha_and_saved_trials",
        """
        ALTER TABLE gate_decisions ADD COLUMN alpha_spent DOUBLE;  -- experiment alpha this row committed (0: none)
        ALTER TABLE budget_ledger ADD COLUMN trials INTEGER;       -- kind 'saved': validation trials not run
        """,
    ),
    (
        "0005_scale_infra_errors",
        # A trial whose worker or node died is dispatched again (evaluation.ray_executor); each
        # failure before the recorded attempt is kept: [{node, ray_node_id, error, after_s}].
        """
        ALTER TABLE trials ADD COLUMN infra_errors JSON;
        """,
    ),
    (
        "0006_memory_history",
        # The meta-agent's memory (issue 13) and its traces (issue 12 item 9): the proposal's
        # transcript (an `invoke_agent meta-agent` trace in spans), its falsifiable manifest and
        # the checks run on it, and a notebook it keeps across proposals.
        """
        ALTER TABLE candidates ADD COLUMN proposal_trace_id VARCHAR;  -- trace of the meta-agent session
        ALTER TABLE candidates ADD COLUMN predictions JSON;         -- {cause, fixes: [train task], keeps: [train task]}
        ALTER TABLE candidates ADD COLUMN prediction_check JSON;    -- meta_agent.predictions.PredictionCheck
        ALTER TABLE candidates ADD COLUMN liveness JSON;            -- meta_agent.liveness.Liveness
        CREATE TABLE notebook (
            experiment_id VARCHAR NOT NULL,
            seq INTEGER NOT NULL,            -- 1, 2, ... per experiment, in writing order
            parent_id VARCHAR,               -- the candidate the session was proposing a child of
            trace_id VARCHAR,                -- the meta-agent session that wrote it
            text VARCHAR NOT NULL,
            written_at TIMESTAMP NOT NULL
        );
        """,
    ),
    (
        "0007_integrity_tamper_evidence",
        # status gains `tampered` (score 0): what the verifier would run was changed, or the
        # reward contradicts the verifier's own output. Evidence: [{rule, path, change, detail,
        # sha256, pristine_sha256}]; integrity: what the runner checked (stop, scan, pristine re-check).
        """
        ALTER TABLE trials ADD COLUMN tamper_evidence JSON;
        ALTER TABLE trials ADD COLUMN integrity JSON;
        """,
    ),
    (
        "0008_bilevel_mechanisms",
        """
        CREATE TABLE mechanisms (
            experiment_id VARCHAR NOT NULL,
            mechanism_hash VARCHAR NOT NULL,  -- sha256 of the source
            name VARCHAR NOT NULL,
            origin VARCHAR NOT NULL,          -- builtin | generated
            source VARCHAR NOT NULL,
            spec JSON,                        -- the Level-2 Specify object
            session_id VARCHAR,
            status VARCHAR NOT NULL,          -- builtin | validating | refused | on_trial | kept | rolled_back | off
            status_reason VARCHAR,
            trial JSON,                       -- judgement plan: windows and their order
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL,
            PRIMARY KEY (experiment_id, mechanism_hash)
        );
        CREATE TABLE mechanism_checks (
            experiment_id VARCHAR NOT NULL,
            mechanism_hash VARCHAR NOT NULL,
            step VARCHAR NOT NULL,            -- parse | imports | contract | dry_run
            attempt INTEGER NOT NULL,
            ok BOOLEAN NOT NULL,
            reason VARCHAR NOT NULL,
            detail JSON,
            checked_at TIMESTAMP NOT NULL
        );
        CREATE TABLE mechanism_calls (
            experiment_id VARCHAR NOT NULL,
            iteration INTEGER NOT NULL,
            candidate_id VARCHAR,
            mechanism_hash VARCHAR NOT NULL,
            mechanism VARCHAR NOT NULL,
            hook VARCHAR NOT NULL,
            status VARCHAR NOT NULL,          -- ok | raised | timeout | garbage | dead | skipped
            output JSON,
            error VARCHAR,
            effect VARCHAR,
            state JSON,
            ms DOUBLE,
            called_at TIMESTAMP NOT NULL
        );
        CREATE TABLE mechanism_active_sets (
            experiment_id VARCHAR NOT NULL,
            iteration INTEGER NOT NULL,
            hashes JSON NOT NULL,
            reason VARCHAR NOT NULL,
            changed_at TIMESTAMP NOT NULL
        );
        CREATE TABLE search_params (
            experiment_id VARCHAR NOT NULL,
            iteration INTEGER NOT NULL,
            params JSON NOT NULL,
            reason VARCHAR NOT NULL,
            decided_at TIMESTAMP NOT NULL
        );
        CREATE TABLE mechanism_judgements (
            experiment_id VARCHAR NOT NULL,
            mechanism_hash VARCHAR NOT NULL,
            iteration INTEGER NOT NULL,
            outcome VARCHAR NOT NULL,         -- keep | roll_back | undecided
            rule VARCHAR NOT NULL,
            reason VARCHAR NOT NULL,
            windows JSON,
            n_pairs INTEGER,
            mean_diff DOUBLE,
            ci_low DOUBLE,
            ci_high DOUBLE,
            judged_at TIMESTAMP NOT NULL
        );
        CREATE TABLE level2_sessions (
            session_id VARCHAR PRIMARY KEY,
            experiment_id VARCHAR NOT NULL,
            round INTEGER NOT NULL,
            iteration INTEGER NOT NULL,
            model VARCHAR NOT NULL,
            outcome VARCHAR NOT NULL,         -- module | spec_error | code_error | model_error
            errors JSON,
            spec JSON,
            mechanism_hash VARCHAR,
            messages JSON,
            usd DOUBLE,
            started_at TIMESTAMP NOT NULL,
            finished_at TIMESTAMP NOT NULL
        );
        ALTER TABLE candidates ADD COLUMN mechanisms JSON;  -- hashes of the active mechanism set
        """,
    ),
    (
        "0009_meta_bench_results",  # owner: metaopt/meta_bench/results.py
        """
        CREATE TABLE meta_bench_results (
            bench_id VARCHAR NOT NULL,        -- one `metaopt bench meta` invocation
            case_name VARCHAR NOT NULL,
            meta_model VARCHAR NOT NULL,
            category VARCHAR NOT NULL,
            proposed BOOLEAN NOT NULL,        -- the meta-agent wrote a revision
            fixed BOOLEAN NOT NULL,           -- every affected task passes on replay
            cause_named BOOLEAN NOT NULL,
            broken JSON,                      -- keep tasks the proposal broke (collateral damage)
            turns INTEGER,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cost_usd DOUBLE,
            wall_s DOUBLE,
            cause VARCHAR,                    -- what the proposal said the cause was
            changed JSON,                     -- the harness fields the proposal changed (dotted paths)
            error VARCHAR,
            finished_at TIMESTAMP NOT NULL,
            PRIMARY KEY (bench_id, case_name)
        );
        """,
    ),
]
