"""The studio's questions to the run store, as functions of a DuckDB connection -> DataFrame.

`DuckDBRunStore` calls these with its thread's cursor; the column sets are documented on the
matching `RunStore` methods. Every query keeps invalid entries (marked invalid, any NaN or
infinite objective, rejected) off the front and out of "best" by filtering them explicitly:
DuckDB sorts NaN as the largest value, so an unfiltered `max` or `ORDER BY ... DESC` would crown
a NaN (field case F7).

Which evaluation stands for a candidate (compare like with like): its full validation result if
it has one, else its latest minibatch result, else its latest result of another split; the
held-out `test` split never does (it has its own columns). See `_PREFERRED`. The front and the
best entry are then taken among the valid rows of the most complete split present only.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import duckdb
import numpy as np

from core.storage._journal_files import journal_refusal
from core.storage._stored_tables import (
    _df,  # pyright: ignore[reportPrivateUsage]
    ingest_errors,
    list_proposals,
    list_topology_versions,
    logs,
    proposal,
)
from core.storage.journal import journal_is_live
from core.vocab.pareto import DEFAULT_OBJECTIVES, Objective, pareto_front_mask

if TYPE_CHECKING:
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]


def _pandas() -> Any:
    """pandas, imported on first use: a search that never asks the store a question does not
    load it (pandas and pyarrow add about 75 MiB to a process)."""
    import pandas  # pyright: ignore[reportMissingTypeStubs]

    return pandas


__all__ = [
    "OBJECTIVE_COLUMNS",
    "TEST_FRONT_COLUMNS",
    "archive",
    "candidate_examples",
    "compare_candidates",
    "effective_status",
    "example_trace",
    "ingest_errors",
    "interrupted_journals",
    "interrupted_runs",
    "list_proposals",
    "proposal",
    "list_runs",
    "list_topology_versions",
    "logs",
    "progress",
    "snapshots",
    "status_label",
    "test_front",
]

_TIER: Final = "CASE r.split WHEN 'validation' THEN 0 WHEN 'minibatch' THEN 1 ELSE 2 END"
"""Preference of a result's split: lower is more complete."""

_VALID: Final = """coalesce(
    r.valid AND isfinite(r.accuracy) AND isfinite(r.cost_usd) AND isfinite(r.latency_ms)
    AND isfinite(r.aggregate_score) AND r.n_agents IS NOT NULL AND r.depth IS NOT NULL
    AND c.status IS DISTINCT FROM 'rejected', false)"""
"""A result is valid only if marked valid, every objective is finite and the candidate was not
rejected (F7). `isfinite(NULL)` is NULL, hence the coalesce."""


def _bad(name: str) -> str:
    return (
        f"WHEN r.{name} IS NULL THEN 'missing_{name}' "
        f"WHEN isnan(r.{name}) THEN 'nan_{name}' "
        f"WHEN NOT isfinite(r.{name}) THEN 'inf_{name}' "
    )


_REASON: Final = (
    "CASE WHEN c.status = 'rejected' THEN 'rejected: ' || coalesce(c.reason, '') "
    "WHEN r.invalid_reason IS NOT NULL THEN r.invalid_reason "
    + "".join(_bad(n) for n in ("accuracy", "cost_usd", "latency_ms", "aggregate_score"))
    + "WHEN r.n_agents IS NULL OR r.depth IS NULL THEN 'missing_structure' "
    "WHEN NOT coalesce(r.valid, false) THEN 'invalid' END"
)
"""Why a result is not valid (the search's own reason first)."""

_PREFERRED: Final = f"""
    SELECT r.*, {_TIER} AS tier, {_VALID} AS valid_eff,
           CASE WHEN {_VALID} THEN NULL ELSE {_REASON} END AS reason_eff
    FROM candidate_results r
    LEFT JOIN candidates c ON c.run_id = r.run_id AND c.candidate_idx = r.candidate_idx
    WHERE {{where}}
    QUALIFY row_number() OVER (
        PARTITION BY r.run_id, r.candidate_idx ORDER BY {_TIER}, r.seq DESC) = 1
"""
"""One result per candidate (format `where` over `r`, e.g. the run and split filter)."""


def status_label(status: str, reason: str | None, last_event_at: float | None) -> str:
    """Human text for a run's state, e.g. `"running, data as of 2025-01-01 12:00:03 UTC"`.

    An event time that is no date (NaN, infinite, beyond the platform's calendar) is shown as
    a number, e.g. `"t=1e+20 (not a date)"`: a runs list never raises over one odd event.
    """
    as_of = "no events yet"
    if last_event_at is not None:
        try:
            as_of = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last_event_at))
        except (OverflowError, OSError, ValueError):
            as_of = f"t={last_event_at:g} (not a date)"
    if status == "running":
        return f"running, data as of {as_of}"
    if status == "interrupted":
        return f"interrupted (no process writes it), data as of {as_of}; resume it with --resume"
    return f"{status}: {reason}" if reason else status


def effective_status(status: str, journal: str | None, journal_dir: Path | None) -> str:
    """A stored status, with `running` turned into `interrupted` when the run's journal exists
    and no live process holds it (see `journal_is_live`).

    The stored status must have been read after the lock was seen free, else a writer that
    appended its `run_finished` and let go in between reads as interrupted: a caller that
    ingests journals re-reads them when this says `interrupted` (`DuckDBRunStore` does).

    A journal that `journal_refusal` refuses (outside `journal_dir`, not a regular file) is
    never probed: the status is returned as stored (a store lists such a run `damaged`)."""
    if status != "running" or journal is None or journal_dir is None:
        return status
    if journal_refusal(journal_dir, journal) is not None:
        return status
    path = journal_dir / journal
    if not path.exists():
        return status
    live = journal_is_live(path)
    return "interrupted" if live is False else status


def interrupted_journals(
    con: duckdb.DuckDBPyConnection, journal_dir: Path | None
) -> list[tuple[str, str]]:
    """`(run_id, journal)` of the stored-as-running runs whose journal no live process holds
    any more (the journal's file name in `journal_dir`)."""
    if journal_dir is None:
        return []
    rows = con.execute(
        "SELECT run_id, journal FROM runs WHERE status = 'running' AND journal IS NOT NULL "
        "ORDER BY run_id"
    ).fetchall()
    return [
        (str(run_id), str(journal))
        for run_id, journal in rows
        if effective_status("running", str(journal), journal_dir) == "interrupted"
    ]


def interrupted_runs(con: duckdb.DuckDBPyConnection, journal_dir: Path | None) -> list[str]:
    """The stored-as-running runs whose journal no live process holds any more."""
    return [run_id for run_id, _ in interrupted_journals(con, journal_dir)]


def list_runs(
    con: duckdb.DuckDBPyConnection,
    journal_dir: Path | None = None,
    *,
    interrupted: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every run, newest first (columns: see `RunStore.list_runs`).

    Args:
        con: a connection to a run store.
        journal_dir: the journal folder; a `running` run whose journal no live process holds
            is reported `interrupted`. None: statuses as stored.
        interrupted: the runs to report `interrupted` (those still stored as `running`), as
            the caller decided them; None: `interrupted_runs(con, journal_dir)` now. A store
            that ingests journals decides them itself, because a journal found unlocked must
            be read once more before its run is called interrupted (`DuckDBRunStore`).
    """
    sql = f"""
    WITH res AS ({_PREFERRED.format(where="r.split <> 'test'")}),
    best AS (
        SELECT run_id, candidate_idx AS best_idx, aggregate_score AS best_score FROM (
            SELECT *, min(tier) OVER (PARTITION BY run_id) AS best_tier FROM res WHERE valid_eff
        ) WHERE tier = best_tier
        QUALIFY row_number() OVER (
            PARTITION BY run_id ORDER BY aggregate_score DESC, candidate_idx) = 1
    ),
    ev AS (
        SELECT run_id, count(*) FILTER (WHERE NOT cached) AS n_evaluations,
               coalesce(sum(cost_usd) FILTER (WHERE NOT cached AND isfinite(cost_usd)), 0.0)
                   AS eval_cost
        FROM evaluations GROUP BY run_id
    ),
    cand AS (
        SELECT run_id, count(*) AS n_candidates,
               coalesce(sum(design_cost_usd) FILTER (WHERE isfinite(design_cost_usd)), 0.0)
                   AS design_cost,
               sum(design_requests) AS design_requests,
               sum(design_input_tokens) AS design_input_tokens,
               sum(design_output_tokens) AS design_output_tokens
        FROM candidates GROUP BY run_id
    ),
    base AS (
        SELECT runs.*,
               CASE WHEN runs.status = 'running'
                         AND list_contains($interrupted::VARCHAR[], runs.run_id)
                    THEN 'interrupted' ELSE runs.status END AS status_now
        FROM runs
    )
    SELECT b.run_id, b.problem, b.strategy, b.seed, b.status_now AS status, b.reason, b.started_at, b.finished_at, b.last_event_at,
           coalesce(b.finished_at, b.last_event_at) - b.started_at AS wall_s,
           b.n_events, b.n_resumes,
           coalesce(cand.n_candidates, 0) AS n_candidates,
           coalesce(ev.n_evaluations, 0) AS n_evaluations,
           -- a run with no example rows (phase 2, which records its candidates' totals only)
           -- costs what its run_finished says it spent (metric calls + reflection)
           CASE WHEN ev.run_id IS NULL
                     AND isfinite(TRY_CAST(json_extract(b.budget_used, '$.usd') AS DOUBLE))
                THEN TRY_CAST(json_extract(b.budget_used, '$.usd') AS DOUBLE)
                ELSE coalesce(ev.eval_cost, 0.0) + coalesce(cand.design_cost, 0.0)
           END AS cost_usd,
           -- the designer's (meta agent) or reflection model's (phase 2) own calls, apart:
           -- their cost, requests and tokens
           coalesce(TRY_CAST(json_extract(b.budget_used, '$.reflection_usd') AS DOUBLE),
                    cand.design_cost, 0.0) AS design_cost_usd,
           coalesce(TRY_CAST(json_extract(b.budget_used, '$.reflection_requests') AS DOUBLE),
                    cand.design_requests, 0)::BIGINT AS design_requests,
           coalesce(TRY_CAST(json_extract(b.budget_used, '$.reflection_input_tokens') AS DOUBLE),
                    cand.design_input_tokens, 0)::BIGINT AS design_input_tokens,
           coalesce(TRY_CAST(json_extract(b.budget_used, '$.reflection_output_tokens') AS DOUBLE),
                    cand.design_output_tokens, 0)::BIGINT AS design_output_tokens,
           best.best_idx, best.best_score,
           -- phase 2 of `search --then-prompts` names the search it is phase 2 of
           CASE WHEN json_extract_string(b.config, '$.phase') = 'prompts'
                THEN json_extract_string(b.config, '$.parent_run_id') END AS parent_run_id,
           -- where it ran (`Executor.describe()`); runs recorded before executors: local
           coalesce(json_extract_string(b.config, '$.executor'), 'local') AS executor
    FROM base b
    LEFT JOIN best USING (run_id)
    LEFT JOIN ev USING (run_id)
    LEFT JOIN cand USING (run_id)
    ORDER BY b.started_at DESC NULLS LAST, b.run_id DESC
    """
    if interrupted is None:
        interrupted = interrupted_runs(con, journal_dir)
    cur = con.execute(sql, {"interrupted": list(interrupted)})
    columns = [d[0] for d in cur.description or []]
    at = columns.index("status") + 1
    rows = [
        (
            *row[:at],
            status_label(row[at - 1], row[at], row[columns.index("last_event_at")]),
            *row[at:],
        )
        for row in cur.fetchall()
    ]
    columns.insert(at, "status_label")
    return _pandas().DataFrame(rows, columns=columns)


OBJECTIVE_COLUMNS: Final[frozenset[str]] = frozenset(
    {
        "accuracy",
        "cost_usd",
        "latency_ms",
        "n_agents",
        "depth",
        "aggregate_score",
        "error_rate",
        "blank_rate",
        "stdev",
        "n_examples",
    }
)
"""The archive columns an objective may name."""

_T = TypeVar("_T")

_ARCHIVE_COLUMNS: Final = """
    candidate_idx, generation, parent_idx, operator, thought, candidate_status, reason,
    spec_hash, objective_split, n_examples, accuracy, cost_usd, latency_ms, n_agents, depth,
    aggregate_score, error_rate, blank_rate, stdev, valid, invalid_reason, same_as,
    valid AND list_contains($front::INTEGER[], candidate_idx) AS on_front, is_best,
    in_snapshot, snapshot_front AND valid AS snapshot_front, test_accuracy, test_aggregate_score
"""


def archive(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    *,
    split: str | None = None,
    objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
    include_unevaluated: bool = False,
) -> pd.DataFrame:
    """A run's archive as a DataFrame (`_archive`, which documents it)."""
    return _archive(
        con,
        run_id,
        split=split,
        objectives=objectives,
        include_unevaluated=include_unevaluated,
        fetch=lambda cur: cur.df(),
    )


def archive_records(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    *,
    split: str | None = None,
    objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
    include_unevaluated: bool = False,
) -> list[dict[str, Any]]:
    """`archive`'s rows as plain dicts keyed by column, a missing value (NULL, or a NaN score
    kept on an invalid row) None, read with `fetchall` so pandas is never imported (it and
    pyarrow add about 70 MiB to a process: the CLI's end-of-search report reads the store this
    way)."""
    rows = _archive(
        con,
        run_id,
        split=split,
        objectives=objectives,
        include_unevaluated=include_unevaluated,
        fetch=fetch_records,
    )
    return [{k: None if is_missing(v) else v for k, v in row.items()} for row in rows]


def fetch_records(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The rest of a query's result as dicts keyed by column name (`cursor.description`)."""
    names = [str(d[0]) for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def is_missing(value: Any) -> bool:
    """True for None, a float NaN, pandas' NA and NaT: the values a table reports as missing.

    Tested by `value != value` (true of NaN and NaT only; pandas' NA refuses a truth value), so
    the check never imports pandas."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return True  # pandas.NA: its comparison's truth value is ambiguous


def _archive(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    *,
    split: str | None,
    objectives: Sequence[Objective],
    include_unevaluated: bool,
    fetch: Callable[[duckdb.DuckDBPyConnection], _T],
) -> _T:
    """A run's archive with objectives, validity and front membership, read by `fetch`.

    Columns and arguments: see `RunStore.archive`. The front is `core.vocab.pareto`'s
    `pareto_front_mask` over the objectives of the valid rows of the most complete split present
    (`comparable`: the rows `is_best` is chosen among), so a candidate scored only on a small
    minibatch never pushes a fully validated one off the front (compare like with like).

    Raises:
        ValueError: an objective names no numeric archive column (see `OBJECTIVE_COLUMNS`).
    """
    names = [o.name for o in objectives]
    unknown = [n for n in names if n not in OBJECTIVE_COLUMNS]
    if unknown:
        raise ValueError(f"unknown objective column(s) {unknown}; use {sorted(OBJECTIVE_COLUMNS)}")
    where = "r.run_id = $run AND (r.split = $split OR ($split IS NULL AND r.split <> 'test'))"
    sql = f"""
    WITH res AS ({_PREFERRED.format(where=where)}),
    keys AS (
        SELECT candidate_idx FROM res
        UNION
        SELECT candidate_idx FROM candidates WHERE run_id = $run AND $unevaluated
    ),
    snap AS (SELECT entries, front FROM snapshots WHERE run_id = $run ORDER BY seq DESC LIMIT 1),
    test AS (
        SELECT candidate_idx, accuracy, aggregate_score FROM candidate_results
        WHERE run_id = $run AND split = 'test'
        QUALIFY row_number() OVER (PARTITION BY candidate_idx ORDER BY seq DESC) = 1
    ),
    joined AS (
        SELECT k.candidate_idx, c.generation, c.parent_idx, c.operator, c.thought,
               c.status AS candidate_status, c.reason,
               coalesce(res.spec_hash, c.spec_hash) AS spec_hash,
               res.split AS objective_split, res.n_examples,
               res.accuracy, res.cost_usd, res.latency_ms, res.n_agents, res.depth,
               res.aggregate_score, res.error_rate, res.blank_rate, res.stdev, res.same_as,
               coalesce(res.valid_eff, false) AS valid,
               CASE WHEN coalesce(res.valid_eff, false) THEN NULL
                    WHEN res.candidate_idx IS NULL THEN
                        CASE WHEN c.status = 'rejected' THEN 'rejected: ' || coalesce(c.reason, '')
                             WHEN c.status = 'duplicate' THEN 'duplicate'
                             ELSE 'not_evaluated' END
                    ELSE res.reason_eff END AS invalid_reason,
               res.tier,
               coalesce(list_contains((SELECT entries FROM snap), k.candidate_idx), false)
                   AS in_snapshot,
               coalesce(list_contains((SELECT front FROM snap), k.candidate_idx), false)
                   AS snapshot_front,
               test.accuracy AS test_accuracy, test.aggregate_score AS test_aggregate_score
        FROM keys k
        LEFT JOIN res ON res.candidate_idx = k.candidate_idx
        LEFT JOIN candidates c ON c.run_id = $run AND c.candidate_idx = k.candidate_idx
        LEFT JOIN test ON test.candidate_idx = k.candidate_idx
    ),
    tiered AS (
        SELECT *, min(tier) FILTER (WHERE valid) OVER () AS best_tier,
               coalesce(valid AND same_as IS NULL, false) AS own
        FROM joined
    )
    SELECT * EXCLUDE (tier, best_tier, own),
           coalesce(own AND tier = best_tier, false) AS comparable,
           coalesce(own AND tier = best_tier AND row_number() OVER (
               PARTITION BY own AND tier = best_tier
               ORDER BY aggregate_score DESC, candidate_idx) = 1, false) AS is_best
    FROM tiered
    """
    params: dict[str, object] = {
        "run": run_id,
        "split": split,
        "unevaluated": include_unevaluated,
    }
    k = len(names)
    con.execute("BEGIN TRANSACTION")  # both reads see the same data
    try:
        rows = con.execute(
            f"SELECT candidate_idx, comparable, {', '.join(names)} FROM ({sql}) "
            "ORDER BY candidate_idx",
            params,
        ).fetchall()
        points = np.full((len(rows), k), np.nan, dtype=np.float64)
        for i, row in enumerate(rows):
            if row[1]:
                points[i] = [np.nan if v is None else float(v) for v in row[2:]]
        mask = pareto_front_mask(points, [o.direction for o in objectives])
        front = [int(row[0]) for row, on in zip(rows, mask.tolist(), strict=True) if on]
        result = fetch(
            con.execute(
                f"SELECT {_ARCHIVE_COLUMNS} FROM ({sql}) ORDER BY candidate_idx",
                {**params, "front": front},
            )
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return result


def candidate_examples(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    candidate_idx: int,
    *,
    split: str | None = None,
    with_trace: bool = False,
) -> pd.DataFrame:
    """A candidate's per-example results (columns: see `RunStore.candidate_examples`)."""
    trace = ", trace::VARCHAR AS trace" if with_trace else ""
    return _df(
        con,
        f"""
        SELECT split, example_id, trial, accuracy, cost_usd, latency_ms, input_tokens,
               output_tokens, requests, status, error, output_summary, cached, seq, ts{trace}
        FROM evaluations
        WHERE run_id = $run AND candidate_idx = $idx AND ($split IS NULL OR split = $split)
        ORDER BY split, example_id, trial
        """,
        {"run": run_id, "idx": candidate_idx, "split": split},
    )


def example_accuracies(
    con: duckdb.DuckDBPyConnection, run_id: str, candidate_idx: int, *, split: str | None = None
) -> list[tuple[str, int, float | None]]:
    """`(example_id, trial, accuracy)` of a candidate's results (`RunStore.example_accuracies`)."""
    rows = con.execute(
        "SELECT example_id, trial, accuracy FROM evaluations WHERE run_id = $run "
        "AND candidate_idx = $idx AND ($split IS NULL OR split = $split) "
        "ORDER BY split, example_id, trial",
        {"run": run_id, "idx": candidate_idx, "split": split},
    ).fetchall()
    return [(str(e), int(t), None if a is None else float(a)) for e, t, a in rows]


def example_trace(
    con: duckdb.DuckDBPyConnection, run_id: str, candidate_idx: int, example_id: str, trial: int
) -> list[dict[str, Any]] | None:
    """One example's trace as a list of span dicts, or None when not stored."""
    row = con.execute(
        "SELECT trace::VARCHAR FROM evaluations WHERE run_id = ? AND candidate_idx = ? "
        "AND example_id = ? AND trial = ? ORDER BY seq LIMIT 1",
        [run_id, candidate_idx, example_id, trial],
    ).fetchone()
    if row is None:
        return None
    if row[0] is None:
        return []
    spans: list[dict[str, Any]] = json.loads(str(row[0]))
    return spans


def compare_candidates(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    a: int,
    b: int,
    *,
    run_id_b: str | None = None,
    threshold: float = 0.5,
) -> pd.DataFrame:
    """Two candidates compared per example (columns: see `RunStore.compare_candidates`)."""
    side = """
        SELECT split, example_id, avg(accuracy) AS acc,
               coalesce(any_value(status) FILTER (WHERE status <> 'ok'), 'ok') AS st
        FROM evaluations WHERE run_id = $run_{s} AND candidate_idx = $idx_{s}
        GROUP BY split, example_id
    """
    sql = f"""
    WITH a AS ({side.format(s="a")}), b AS ({side.format(s="b")}),
    j AS (
        SELECT coalesce(a.split, b.split) AS split,
               coalesce(a.example_id, b.example_id) AS example_id,
               a.acc AS accuracy_a, b.acc AS accuracy_b,
               coalesce(isfinite(a.acc) AND a.acc >= $t AND a.st <> 'error', false) AS right_a,
               coalesce(isfinite(b.acc) AND b.acc >= $t AND b.st <> 'error', false) AS right_b,
               a.st AS status_a, b.st AS status_b,
               a.example_id IS NULL AS missing_a, b.example_id IS NULL AS missing_b
        FROM a FULL OUTER JOIN b ON a.split = b.split AND a.example_id = b.example_id
    )
    SELECT split, example_id, accuracy_a, accuracy_b, right_a, right_b, status_a, status_b,
           CASE WHEN missing_a THEN 'only_b' WHEN missing_b THEN 'only_a'
                WHEN right_a AND NOT right_b THEN 'right_to_wrong'
                WHEN right_b AND NOT right_a THEN 'wrong_to_right'
                WHEN right_a THEN 'both_right' ELSE 'both_wrong' END AS change
    FROM j ORDER BY split, example_id
    """
    params = {
        "run_a": run_id,
        "idx_a": a,
        "run_b": run_id if run_id_b is None else run_id_b,
        "idx_b": b,
        "t": threshold,
    }
    return _df(con, sql, params)


def progress(con: duckdb.DuckDBPyConnection, run_id: str) -> pd.DataFrame:
    """Cost and best score over evaluations (columns: see `RunStore.progress`)."""
    sql = f"""
    WITH ev AS (
        SELECT seq, ts, 0 AS kind, NULL::INTEGER AS candidate_idx, NULL::VARCHAR AS split,
               CASE WHEN cached THEN 0 ELSE 1 END AS n_eval,
               CASE WHEN NOT cached AND isfinite(cost_usd) THEN cost_usd ELSE 0.0 END AS cost,
               CASE WHEN NOT cached AND NOT coalesce(isfinite(cost_usd), false) THEN 1 ELSE 0 END
                   AS unpriced,
               NULL::DOUBLE AS score, NULL::BOOLEAN AS valid
        FROM evaluations WHERE run_id = $run
        UNION ALL
        SELECT seq, ts, 1, NULL, NULL, 0,
               CASE WHEN isfinite(design_cost_usd) THEN design_cost_usd ELSE 0.0 END, 0, NULL, NULL
        FROM candidates WHERE run_id = $run
        UNION ALL
        SELECT r.seq, r.ts, 2, r.candidate_idx, r.split, 0, 0.0, 0, r.aggregate_score, {_VALID}
        FROM candidate_results r
        LEFT JOIN candidates c ON c.run_id = r.run_id AND c.candidate_idx = r.candidate_idx
        WHERE r.run_id = $run
    ),
    cum AS (
        SELECT *, sum(n_eval) OVER w AS n_evaluations, sum(cost) OVER w AS cost_usd,
               sum(unpriced) OVER w AS n_unpriced
        FROM ev WINDOW w AS (ORDER BY seq, kind ROWS UNBOUNDED PRECEDING)
    )
    SELECT seq, ts, candidate_idx, split, n_evaluations::BIGINT AS n_evaluations, cost_usd,
           n_unpriced::BIGINT AS n_unpriced, CASE WHEN valid THEN score END AS score, valid,
           max(CASE WHEN valid THEN score END) OVER (
               PARTITION BY split ORDER BY seq ROWS UNBOUNDED PRECEDING) AS best_score
    FROM cum WHERE kind = 2
    ORDER BY seq
    """
    return _df(con, sql, {"run": run_id})


def snapshots(con: duckdb.DuckDBPyConnection, run_id: str) -> pd.DataFrame:
    """The run's archive snapshots in order (columns: see `RunStore.snapshots`).

    As recorded, except that invalid candidates are dropped from `front` and never stand as
    `best_idx` / `best_score` (F7): a snapshot whose best is invalid or not finite has None.
    """
    sql = f"""
    WITH res AS ({_PREFERRED.format(where="r.run_id = $run AND r.split <> 'test'")}),
    ok AS (SELECT coalesce(list(candidate_idx), []) AS idx FROM res WHERE valid_eff)
    SELECT s.seq, s.ts, s.generation, s.entries,
           list_filter(s.front, lambda x: list_contains(ok.idx, x)) AS front,
           CASE WHEN isfinite(s.best_score) AND list_contains(ok.idx, s.best_idx)
                THEN s.best_idx END AS best_idx,
           CASE WHEN isfinite(s.best_score) AND list_contains(ok.idx, s.best_idx)
                THEN s.best_score END AS best_score,
           s.hypervolume, s.n_evaluations, s.cost_usd_total
    FROM snapshots s CROSS JOIN ok WHERE s.run_id = $run ORDER BY s.seq
    """
    cur = con.execute(sql, {"run": run_id})
    columns = [d[0] for d in cur.description or []]
    return _pandas().DataFrame(cur.fetchall(), columns=columns)


TEST_FRONT_COLUMNS: Final[tuple[str, ...]] = (
    "candidate_idx",
    "operator",
    "n_agents",
    "depth",
    "accuracy",
    "cost_usd",
    "latency_ms",
    "aggregate_score",
    "test_n_examples",
    "test_accuracy",
    "test_cost_usd",
    "test_latency_ms",
    "test_aggregate_score",
    "test_valid",
    "on_test_front",
    "val_minus_test_accuracy",
)
"""The columns of `test_front`."""


def test_front(
    validation: pd.DataFrame,
    test: pd.DataFrame,
    objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
) -> pd.DataFrame:
    """The held-out test scores of the candidates on the validation Pareto front.

    The search scores every candidate of its final validation front once on the test split
    (older runs scored the winner only). A test score is reported, never used
    to choose: the front's members come from the validation archive alone, and `on_test_front`
    only says which of them no other member beats on the test split (the same `objectives`,
    over the members with a valid test score).

    Args:
        validation: `RunStore.archive(run_id, split="validation")`.
        test: `RunStore.archive(run_id, split="test")`.
        objectives: the front's objectives (default: the archive's).

    Returns:
        One row per validation-front candidate, ordered by validation cost (USD per example)
        then `candidate_idx`, columns `TEST_FRONT_COLUMNS`: its validation `accuracy`,
        `cost_usd` (USD per example), `latency_ms` (ms per example) and `aggregate_score`; the
        same on the test split as `test_*` (NaN when it was not scored there) with
        `test_n_examples` (0 then) and `test_valid`; `val_minus_test_accuracy`: validation
        minus test accuracy (how much choosing on validation flattered it; NaN when not scored
        on test). Empty (with these columns) when the run has no validation front.
    """
    if validation.empty or "on_front" not in validation.columns:
        return _pandas().DataFrame(columns=list(TEST_FRONT_COLUMNS))
    rows = test_front_records(records_of(validation), records_of(test), objectives)
    return _pandas().DataFrame(rows, columns=list(TEST_FRONT_COLUMNS))


def test_front_records(
    validation: Iterable[Mapping[str, Any]],
    test: Iterable[Mapping[str, Any]],
    objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
) -> list[dict[str, Any]]:
    """`test_front`'s rows as dicts keyed by `TEST_FRONT_COLUMNS`, from archive rows as dicts
    (`archive_records` of the validation and test splits): no pandas. `[]` when the run has no
    validation front."""
    tests: dict[int, Mapping[str, Any]] = {}
    for r in test:
        tests[int(r["candidate_idx"])] = r
    rows: list[dict[str, Any]] = []
    for r in validation:
        if not bool(r.get("on_front")):
            continue
        t = tests.get(int(r["candidate_idx"]))
        row = {c: r.get(c) for c in TEST_FRONT_COLUMNS[:8]}
        row["test_n_examples"] = (
            0 if t is None or is_missing(t["n_examples"]) else int(t["n_examples"])
        )
        for name in ("accuracy", "cost_usd", "latency_ms", "aggregate_score"):
            value: Any = t.get(name) if t is not None else None
            row[f"test_{name}"] = math.nan if is_missing(value) else float(value)
        row["test_valid"] = bool(t.get("valid")) if t is not None else False
        val_acc: Any = row.get("accuracy")
        test_acc: Any = t.get("accuracy") if t is not None else None
        row["val_minus_test_accuracy"] = (
            math.nan
            if is_missing(val_acc) or is_missing(test_acc)
            else float(val_acc) - float(test_acc)
        )
        rows.append(row)
    rows.sort(key=lambda row: (float(row["cost_usd"]), int(row["candidate_idx"])))
    points = np.full((len(rows), len(objectives)), np.nan, dtype=np.float64)
    for i, row in enumerate(rows):
        if row["test_valid"]:
            points[i] = [float(row.get(f"test_{o.name}", row[o.name])) for o in objectives]
    mask = pareto_front_mask(points, [o.direction for o in objectives])
    for row, on in zip(rows, mask.tolist(), strict=True):
        row["on_test_front"] = bool(on)
    return [{c: row[c] for c in TEST_FRONT_COLUMNS} for row in rows]  # the frame's key order


def records_of(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of a frame as dicts keyed by column name (none for an empty frame)."""
    if df.empty:
        return []
    names = [str(c) for c in df.columns]
    return [dict(zip(names, values, strict=True)) for values in df.itertuples(index=False)]
