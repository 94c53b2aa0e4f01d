"""One run, two phases: a topology search and its phase 2 (prompts) shown as one run.

The design chosen: phase 2 of `search --then-prompts` keeps its own record in the run store (its
own journal and run id, its candidates numbered from 0, `strategy="gepa"`,
`config.phase = "prompts"`), linked to the search by `config.parent_run_id`, which
`RunStore.list_runs` gives as `parent_run_id`. Recording it in the search's own journal would
have mixed two numberings of candidates in one run and reopened a run that had finished; the
link keeps every store query as it is. What the user sees is one run with two phases,
addressed by the search's run id:

- `runs` and the studio's Runs page list phase 2 right under its search (`fold_phases`), not as
  an unrelated run; its Live link opens the search's Live page;
- `show RUN` prints phase 1 then phase 2; `apply RUN N --phase 2` applies phase 2's candidate N;
- the search's Live page draws the topology chart and, below it, phase 2's chart;
- Resume (the CLI's `--resume RUN`, the studio's button) continues whichever phase was cut.

A phase 2 whose search is not in the store (a database copied without it) is listed on its own.
The functions here are pure (DataFrames in, values out).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["PHASE_COLUMN", "fold_phases", "phase_two_of", "search_of"]

PHASE_COLUMN = "phase"
"""`fold_phases`' column: `""` for a run with no phase 2, `"1 topology"` for a search that has
one, `"2 prompts"` for its phase 2."""


def _parent(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def phase_two_of(runs: pd.DataFrame) -> dict[str, str]:
    """Search run id -> the run id of its phase 2, for the searches listed in `runs`.

    Args:
        runs: `RunStore.list_runs()` (newest first: a search whose phase 2 ran twice, e.g.
            `--resume` with `--then-prompts` after a completed phase 2, gets its newest).
    """
    if runs.empty or "parent_run_id" not in runs:
        return {}
    listed = {str(r) for r in runs["run_id"].tolist()}
    found: dict[str, str] = {}
    for rid, parent in zip(runs["run_id"].tolist(), runs["parent_run_id"].tolist(), strict=True):
        p = _parent(parent)
        if p is not None and p in listed:
            found.setdefault(p, str(rid))
    return found


def search_of(runs: pd.DataFrame, run_id: str) -> str | None:
    """The search run `run_id` is phase 2 of, when that search is listed in `runs`; else None
    (not a phase 2, or its search is not in the store)."""
    if runs.empty or "parent_run_id" not in runs:
        return None
    for rid, parent in zip(runs["run_id"].tolist(), runs["parent_run_id"].tolist(), strict=True):
        if str(rid) == run_id:
            p = _parent(parent)
            listed = {str(r) for r in runs["run_id"].tolist()}
            return p if p is not None and p in listed else None
    return None


def fold_phases(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with each phase 2 moved right below its search, and a `PHASE_COLUMN`.

    A search's older phase 2 runs (run again after one had completed) are left out: the
    newest is the run's phase 2. Order otherwise as given (newest first).

    Args:
        runs: `RunStore.list_runs()`.

    Returns:
        The same columns plus `PHASE_COLUMN` (see there), index reset. e.g. runs
        `[p2 (phase 2 of s1), s2, s1]` give `[s2 "", s1 "1 topology", p2 "2 prompts"]`.
    """
    if runs.empty:
        return runs.assign(**{PHASE_COLUMN: pd.Series(dtype=str)}).reset_index(drop=True)
    second = phase_two_of(runs)
    listed = {str(r) for r in runs["run_id"].tolist()}
    parents = (
        [_parent(p) for p in runs["parent_run_id"].tolist()]
        if "parent_run_id" in runs
        else [None] * len(runs)
    )
    records = runs.to_dict("records")
    by_id = {str(r["run_id"]): r for r in records}
    rows: list[dict[str, Any]] = []
    for rec, parent in zip(records, parents, strict=True):
        rid = str(rec["run_id"])
        if parent is not None and parent in listed:
            continue  # listed below its search (or an older phase 2 of it: left out)
        if rid in second:
            rows.append({**rec, PHASE_COLUMN: "1 topology"})
            rows.append({**by_id[second[rid]], PHASE_COLUMN: "2 prompts"})
        else:
            rows.append({**rec, PHASE_COLUMN: "" if parent is None else "2 prompts"})
    return pd.DataFrame(rows, columns=[*runs.columns, PHASE_COLUMN])
