"""Tables the studio shows: the runs list, the archive (sort and filter), a candidate's examples.

Pure functions over the run store's DataFrames (`RunStore.list_runs`, `RunStore.archive`,
`RunStore.candidate_examples`); they choose, order and format columns, never query.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from core.storage.queries import status_label

__all__ = [
    "EDITOR_STRATEGY",
    "split_editor_runs",
    "names_in_spec",
    "ARCHIVE_COLUMNS",
    "ARCHIVE_SORTS",
    "SHOWN_FORMATS",
    "RUN_COLUMNS",
    "archive_table",
    "candidate_options",
    "evaluation_table",
    "example_table",
    "format_time",
    "full_split",
    "live_status",
    "run_label",
    "status_word",
    "runs_table",
    "runs_overview",
    "COST_BASIS_TEXT",
    "scored_on",
]

RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "status_label",
    "best_score",
    "cost_usd",
    "n_candidates",
    "problem",
    "strategy",
    "seed",
    "executor",
    "n_evaluations",
    "design_cost_usd",
    "design_input_tokens",
    "design_output_tokens",
    "best_idx",
    "started",
)
"""Columns of the runs list, in order: what a researcher scans first (how the run stands, its
best score, what it cost, how far it got) right after the run, so they are in view at 1000 px
without scrolling sideways (before, problem, strategy and seed came first and
pushed status, score and cost off screen); what the run is and where it ran after them.
`design_cost_usd` is the part of `cost_usd` the designer (meta agent) or the reflection model
(phase 2) spent on its own calls, `design_input_tokens` and `design_output_tokens` those calls'
tokens (the candidates' are not among them)."""

ARCHIVE_COLUMNS: tuple[str, ...] = (
    "candidate_idx",
    "accuracy",
    "cost_usd",
    "aggregate_score",
    "scored_on",
    "on_front",
    "is_best",
    "latency_ms",
    "n_agents",
    "depth",
    "operator",
    "generation",
    "valid",
    "error_rate",
    "invalid_reason",
    "parent_idx",
)
"""Columns of the archive table, in order: the figures a researcher reads first (accuracy,
cost, score, what they were scored on, front and best) right after the candidate, so they are in
view at 1000 px without scrolling sideways (before, the table showed `generation`,
`operator` and three flags there and the scores off screen); how it was made after them."""

ARCHIVE_SORTS: tuple[str, ...] = (
    "aggregate_score",
    "accuracy",
    "cost_usd",
    "latency_ms",
    "n_agents",
    "depth",
    "candidate_idx",
    "generation",
)
"""Columns the archive can be sorted by."""

_SCORE_SORTS = frozenset(ARCHIVE_SORTS) - {"candidate_idx", "generation"}
"""Sorts that rank by a score, where full-split scores come before minibatch estimates."""


def format_time(ts: float | None) -> str:
    """Unix seconds as `"2025-01-01 12:00:03 UTC"`, or `""` when missing."""
    if ts is None or (isinstance(ts, float) and not math.isfinite(ts)):
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _opt(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs list for display: `RUN_COLUMNS`, newest first as the store gives it; the
    `executor` column says where each ran (`"local"` when not recorded).

    Args:
        runs: `RunStore.list_runs()`.
    """
    if runs.empty:
        return pd.DataFrame({c: [] for c in RUN_COLUMNS})
    out = runs.copy()
    out["started"] = [format_time(_opt(t)) for t in out["started_at"].tolist()]
    # `RunStore.list_runs`' `executor`; a frame without it (or a missing value) ran locally
    executor = out["executor"].tolist() if "executor" in out.columns else [None] * len(out)
    out["executor"] = [str(e) if isinstance(e, str) and e else "local" for e in executor]
    if "design_cost_usd" not in out.columns:  # a frame from before the column: none spent
        out["design_cost_usd"] = 0.0
    for tokens in ("design_input_tokens", "design_output_tokens"):
        if tokens not in out.columns:  # a frame from before tokens were recorded: none
            out[tokens] = 0
    return pd.DataFrame(out[list(RUN_COLUMNS)]).reset_index(drop=True)


COST_BASIS_TEXT: dict[str, str] = {
    "replayed": "replayed (modelled)",
    "measured": "measured",
    "": "",
}
"""The Runs table's `costs` column per `StudioManager.cost_basis` value."""


def runs_overview(
    runs: pd.DataFrame,
    *,
    search_states: Mapping[str, str] | None = None,
    cost_basis: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The Runs page's table: `runs_table` (`RUN_COLUMNS`: status, best score, cost first)
    with `live`, `overlay` after `run_id` and `costs` after `cost_usd`; its `status_label` in
    the Live page's words
    (`live_status`: a search this studio pauses or stops says so), a `costs` column (replayed
    or measured, per problem), and `live` / `overlay` links (relative URLs, so they work
    under any base path): the run's Live page, and the Run overlay of the runs of its problem
    (up to 10, newest first, this one among them).

    Args:
        runs: `RunStore.list_runs()`.
        search_states: run id -> `BackgroundSearch.state` of the searches this studio runs.
        cost_basis: problem name -> `StudioManager.cost_basis`.
    """
    table = runs_table(runs)
    if table.empty:
        return table.assign(costs=[], live=[], overlay=[])
    states = search_states or {}
    basis = cost_basis or {}
    records = runs.reset_index(drop=True).to_dict("records")
    table["status_label"] = [
        live_status(
            str(r["status"]),
            _opt(r.get("reason")),
            _opt(r.get("last_event_at")),
            states.get(str(r["run_id"])),
        )
        for r in records
    ]
    table["costs"] = [COST_BASIS_TEXT.get(basis.get(str(p), ""), "") for p in table["problem"]]
    by_problem: dict[str, list[str]] = {}
    for rid, prob in zip(table["run_id"].tolist(), table["problem"].tolist(), strict=True):
        by_problem.setdefault(str(prob), []).append(str(rid))
    table["live"] = [f"live?run={rid}" for rid in table["run_id"].tolist()]
    overlay: list[str] = []
    for rid, prob in zip(table["run_id"].tolist(), table["problem"].tolist(), strict=True):
        same = by_problem[str(prob)]
        pos = same.index(str(rid))
        picked = same[:10] if pos < 10 else [*same[:9], str(rid)]
        overlay.append("overlay?runs=" + ",".join(picked))
    table["overlay"] = overlay
    # the links beside the run id, the cost basis beside the cost: in view without scrolling
    cols = [c for c in table.columns if c not in ("live", "overlay", "costs")]
    cols[1:1] = ["live", "overlay"]
    cols.insert(cols.index("cost_usd") + 1, "costs")
    return pd.DataFrame(table[cols])


def status_word(status: str, search_state: str | None = None) -> str:
    """A run's state in one word, as the status line and the run pickers say it: the store's
    status, except `paused` or `stopping` for a running search this studio holds or stops."""
    if status == "running" and search_state in ("paused", "stopping"):
        return str(search_state)
    return status


EDITOR_STRATEGY = "editor"
"""The strategy of a run that records an evaluation made from the Topology editor
(`StudioManager.record_editor_evaluation`): one candidate, not a search."""


def split_editor_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """`runs` (`RunStore.list_runs` rows) without the editor's evaluations, and how many were
    left out, so a page can list searches alone and say so (before, Runs and Run overlay
    listed every editor evaluation among the searches, with no way to hide them).

    Returns:
        The other rows in their order (index reset), and the count of `EDITOR_STRATEGY` rows.
    """
    if runs.empty or "strategy" not in runs.columns:
        return runs, 0
    editor = [str(s) == EDITOR_STRATEGY for s in runs["strategy"].tolist()]
    kept = runs.loc[[not e for e in editor]].reset_index(drop=True)
    return kept, sum(editor)


def run_label(row: pd.Series | dict[str, Any], search_state: str | None = None) -> str:
    """One line naming a run for a picker, e.g. `"2025...-3f9a1c  gsm8k_replay  evolutionary
    (completed)"`; the state is `status_word(status, search_state)`."""
    get = row.get
    status = status_word(str(get("status") or ""), search_state)
    return f"{get('run_id')}  {get('problem') or '?'}  {get('strategy') or '?'}  ({status})"


def live_status(
    status: str, reason: str | None, last_event_at: float | None, search_state: str | None = None
) -> str:
    """A run's status line for the live page, agreeing with the Runs page.

    The store only knows `running` for a search this studio has paused: the pause lives in the
    manager's in-process state (`BackgroundSearch.state`, which the Runs page shows). That
    state wins while the store still says `running`.

    Args:
        status, reason, last_event_at: the run's record (`RunRecord`).
        search_state: the studio's background search state, or None when this studio does not
            run the search.

    Returns:
        e.g. `"paused, data as of 2025-01-02 00:00:09 UTC"`, else `status_label(...)`.
    """
    label = status_label(status, reason, last_event_at)
    word = status_word(status, search_state)
    if word != status:
        return word + label.removeprefix("running")
    return label


def scored_on(split: Any, n_examples: Any) -> str:
    """What a candidate's scores rest on, e.g. `"validation (300)"` or `"minibatch (20)"`
    ("" when it has no result)."""
    split = _opt(split)
    if not split:
        return ""
    n = _opt(n_examples)
    return f"{split} ({int(n)})" if n is not None else str(split)


_SPLIT_TIER: dict[str, int] = {"validation": 0, "minibatch": 1}
"""How complete a split's scores are (lower is more; other splits 2), as the run store ranks
them (`core.storage.queries._TIER`)."""


def full_split(archive: pd.DataFrame) -> pd.Series:
    """Per row: valid and scored on the run's most complete split present, i.e. the rows the
    store's front and best are chosen among (compare like with like).

    The store's `comparable` column when the frame has it; else derived from `valid` and
    `objective_split` (validation before minibatch before any other split). A frame without
    `objective_split` counts every valid row.

    Returns:
        A bool Series on `archive`'s index.
    """
    if "comparable" in archive.columns:
        return pd.Series(archive["comparable"].astype(bool), index=archive.index)
    valid = (
        archive["valid"].astype(bool)
        if "valid" in archive.columns
        else pd.Series(True, index=archive.index, dtype=bool)
    )
    if "objective_split" not in archive.columns:
        return pd.Series(valid, index=archive.index, dtype=bool)
    tiers = [
        _SPLIT_TIER.get(str(s), 2) if _opt(s) is not None else 3
        for s in archive["objective_split"].tolist()
    ]
    valid_tiers = [t for t, v in zip(tiers, valid.tolist(), strict=True) if v]
    best = min(valid_tiers) if valid_tiers else -1
    return pd.Series(
        [bool(v) and t == best for t, v in zip(tiers, valid.tolist(), strict=True)],
        index=archive.index,
        dtype=bool,
    )


_FILTER_COLUMNS: tuple[str, ...] = (
    "candidate_idx",
    "operator",
    "thought",
    "invalid_reason",
    "accuracy",
    "cost_usd",
    "latency_ms",
    "aggregate_score",
)
"""The archive columns the table's filter searches (with the spec's names)."""

SHOWN_FORMATS: dict[str, str] = {
    "accuracy": "%.3f",
    "cost_usd": "%.5f",
    "latency_ms": "%.0f",
    "aggregate_score": "%.4f",
}
"""How the Live page's archive table shows each figure (its `NumberColumn` formats); the filter
matches a figure as shown as well as its full value (0.5416... is found by `0.542` and `0.54`)."""


def _searched(column: str, value: object) -> str:
    """The text the filter searches for one cell: "" for a missing value; a figure's full
    value and, after it, the figure as the table shows it."""
    if value is None or value != value:  # noqa: PLR0124 (NaN)
        return ""
    fmt = SHOWN_FORMATS.get(column)
    if fmt is not None and isinstance(value, int | float):
        return f"{value} {fmt % value}"
    return str(value)


def archive_table(
    archive: pd.DataFrame,
    *,
    text: str = "",
    only_front: bool = False,
    only_valid: bool = False,
    sort_by: str = "aggregate_score",
    descending: bool = True,
    spec_names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The archive filtered and sorted for the table.

    Args:
        archive: `RunStore.archive(run_id, include_unevaluated=True)`.
        text: keep rows whose operator, thought, invalid reason, candidate number, figures
            (accuracy, cost, latency, score: the full value or as the table shows it,
            `SHOWN_FORMATS`: `0.575`, `0.50000`, `5481`) or the names its spec uses
            (`spec_names`: agents, functions, conditions...) contain this text
            (case-insensitive); "" keeps all.
        only_front: keep Pareto-front rows only.
        only_valid: keep valid rows only.
        sort_by: one of `ARCHIVE_SORTS`; NaN values sort last either way.
        descending: sort direction.
        spec_names: spec hash -> `names_in_spec` of its stored JSON, searched by `text`
            (the filter could not match agent names).

    Returns:
        `ARCHIVE_COLUMNS` (those present; `scored_on` from `objective_split` and
        `n_examples`, see `scored_on`), rows sorted, index reset. Sorted by a score
        (`_SCORE_SORTS`), candidates scored on the run's full split (the store's
        `comparable`) come first and minibatch estimates after them: an estimate on a few
        problems is not ranked above a full validation score.

    Raises:
        ValueError: `sort_by` is not a column of the archive.
    """
    cols = [
        c
        for c in ARCHIVE_COLUMNS
        if c in archive.columns or (c == "scored_on" and "objective_split" in archive.columns)
    ]
    if archive.empty:
        return pd.DataFrame({c: [] for c in cols})
    if sort_by not in archive.columns:
        raise ValueError(f"cannot sort by {sort_by!r}; choose one of {list(ARCHIVE_SORTS)}")
    df = archive
    if only_front:
        df = df.loc[df["on_front"].astype(bool)]
    if only_valid:
        df = df.loc[df["valid"].astype(bool)]
    needle = text.strip().casefold()
    if needle:
        specs = spec_names or {}
        hashes = df["spec_hash"].tolist() if "spec_hash" in df.columns else [None] * len(df)
        keep = [
            needle
            in (
                " ".join(_searched(c, v) for c, v in zip(_FILTER_COLUMNS, values, strict=True))
                + " "
                + specs.get(str(h), "")
            ).casefold()
            for h, values in zip(
                hashes,
                zip(
                    *(
                        df[c].tolist() if c in df.columns else [None] * len(df)
                        for c in _FILTER_COLUMNS
                    ),
                    strict=True,
                ),
                strict=True,
            )
        ]
        df = df.loc[keep]
    df = df.assign(
        scored_on=[
            scored_on(s, n)
            for s, n in zip(
                df["objective_split"].tolist()
                if "objective_split" in df.columns
                else [None] * len(df),
                df["n_examples"].tolist() if "n_examples" in df.columns else [None] * len(df),
                strict=True,
            )
        ],
        _full=full_split(df) if sort_by in _SCORE_SORTS else True,
    )
    df = df.sort_values(
        ["_full", sort_by, "candidate_idx"],
        ascending=[False, not descending, True],
        na_position="last",
    )
    return pd.DataFrame(df[cols]).reset_index(drop=True)


def candidate_options(archive: pd.DataFrame, *, valid_only: bool = False) -> list[int]:
    """Candidate numbers for a picker: front first, then valid ones scored on the full split,
    then the rest, each by aggregate score (best first)."""
    if archive.empty:
        return []
    df = archive
    if valid_only:
        df = df.loc[df["valid"].astype(bool)]
    df = df.assign(_full=full_split(df)).sort_values(
        ["on_front", "_full", "aggregate_score", "candidate_idx"],
        ascending=[False, False, False, True],
        na_position="last",
    )
    return [int(i) for i in df["candidate_idx"].tolist()]


def example_table(examples: pd.DataFrame, *, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A candidate's per-example results for display (split, example, score, cost, latency,
    status, error, output), ordered as the store gives them."""
    cols = list(
        columns
        or (
            "split",
            "example_id",
            "trial",
            "accuracy",
            "cost_usd",
            "latency_ms",
            "status",
            "error",
            "output_summary",
            "cached",
        )
    )
    present = [c for c in cols if c in examples.columns]
    return pd.DataFrame(examples[present]).reset_index(drop=True)


def evaluation_table(results: Sequence[Any]) -> pd.DataFrame:
    """Per-example rows of an evaluation made in the studio (`CandidateEvaluation.results`),
    with the same columns as `example_table`."""
    rows = [
        {
            "split": r.split,
            "example_id": r.example_id,
            "trial": r.trial,
            "accuracy": r.accuracy,
            "cost_usd": r.cost_usd,
            "latency_ms": r.latency_ms,
            "status": r.status,
            "error": r.error,
            "output_summary": r.output_summary,
            "cached": r.cached,
        }
        for r in results
    ]
    return example_table(pd.DataFrame(rows)) if rows else pd.DataFrame()


_NAME_KEYS = re.compile(
    r'"(?:agent_name|callable_name|condition_name|state_updater_name|classifier|evaluator|merge)"'
    r'\s*:\s*"([^"]+)"'
)


def names_in_spec(spec_json: str | None) -> str:
    """The registered names a stored spec uses (agents, functions, conditions, classifiers,
    evaluators, merges), space-separated, for the archive filter; "" for no spec."""
    return " ".join(dict.fromkeys(_NAME_KEYS.findall(spec_json or "")))
