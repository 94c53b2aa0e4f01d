"""Side-by-side comparison of two to four topologies: metrics, graphs, and flipped examples."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from studio.views.tables import candidate_options

__all__ = [
    "COMPARE_METRICS",
    "FLIP_KINDS",
    "CompareItem",
    "compare_metrics",
    "default_candidates",
    "distinct_dot",
    "flip_counts",
    "flipped_examples",
    "format_metric",
    "parse_item",
]

COMPARE_METRICS: tuple[str, ...] = (
    "accuracy",
    "cost_usd",
    "latency_ms",
    "n_agents",
    "depth",
    "aggregate_score",
    "error_rate",
    "n_examples",
    "objective_split",
    "on_front",
    "valid",
)
"""Rows of the metrics table."""

FLIP_KINDS: tuple[str, ...] = (
    "right_to_wrong",
    "wrong_to_right",
    "both_right",
    "both_wrong",
    "only_a",
    "only_b",
)
"""The `change` values of `RunStore.compare_candidates`, in display order."""

CompareItem = tuple[str, int]
"""One compared topology: `(run_id, candidate_idx)`."""


def parse_item(text: str) -> CompareItem:
    """`"RUN:IDX"` (a deep-link form) -> `(run_id, idx)`.

    Raises:
        ValueError: not of that form.
    """
    run, sep, idx = text.rpartition(":")
    if not sep or not run or not idx.strip().isdigit():
        raise ValueError(f"expected RUN:CANDIDATE, got {text!r}")
    return run, int(idx)


def format_metric(name: str, value: Any) -> str:
    """One metric for the compare table, with its unit.

    Shares (`accuracy`, `error_rate`, `blank_rate`, `test_accuracy`) as percentages with two
    decimals (`0.37333` -> `"37.33%"`), `cost_usd` in dollars with four decimals
    (`0.15611134` -> `"$0.1561"`), `latency_ms` in ms below a second and in seconds above
    (`850.0` -> `"850 ms"`, `2718.67` -> `"2.72 s"`), other floats with four decimals, whole
    numbers as integers, booleans as yes/no, missing values (None, NaN) as `"-"`.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, int | float):
        return str(value)
    if name in ("accuracy", "test_accuracy", "error_rate", "blank_rate"):
        return f"{value:.2%}"
    if name.endswith("usd"):
        return f"${value:,.4f}"
    if name.endswith("_ms"):
        return f"{value:,.0f} ms" if abs(value) < 1000 else f"{value / 1000:,.2f} s"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.4f}"
    return f"{int(value)}"


def compare_metrics(rows: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> pd.DataFrame:
    """Metrics side by side: one row per metric (`COMPARE_METRICS`), one column per topology,
    every cell text formatted with its unit by `format_metric` (one type per column, so the
    table converts to Arrow without a fallback).

    Args:
        rows: each topology's archive row (`RunStore.archive`), as mappings.
        labels: a column label per row (e.g. `"1: #7 (3f9a1c)"`); must be unique.

    Raises:
        ValueError: the counts differ or labels repeat.
    """
    if len(rows) != len(labels):
        raise ValueError(f"{len(rows)} rows but {len(labels)} labels")
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels must be unique: {list(labels)}")
    data = {
        label: [format_metric(m, row.get(m)) for m in COMPARE_METRICS]
        for row, label in zip(rows, labels, strict=True)
    }
    return pd.DataFrame(data, index=list(COMPARE_METRICS), dtype=str)


_FIGURES = ("accuracy", "cost_usd", "latency_ms")


def _figures(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(format_metric(m, row.get(m)) for m in _FIGURES)


def default_candidates(archive: pd.DataFrame, n: int) -> list[int]:
    """The candidates a compare page shows for a run before anyone picks: the best first, then
    the seed, then the others in picker order (front first, then by score), skipping those
    whose accuracy, cost and latency equal an already chosen one's while others remain (a pair
    with identical figures shows nothing to compare).

    Args:
        archive: the run's evaluated archive (`RunStore.archive(include_unevaluated=False)`;
            columns `candidate_idx`, `operator`, `is_best`, `on_front`, `aggregate_score` and
            the figures).
        n: how many to choose.

    Returns:
        Up to `n` distinct candidate numbers (fewer only when the run has fewer).
    """
    if archive.empty or n <= 0:
        return []
    order = candidate_options(archive)
    rows = {int(r["candidate_idx"]): r for r in archive.to_dict("records")}
    best = [i for i in order if bool(rows[i].get("is_best"))]
    seeds = sorted(i for i in order if rows[i].get("operator") == "seed") or [min(order)]
    ranked = list(dict.fromkeys([*(best or order[:1]), seeds[0], *order]))
    chosen: list[int] = []
    seen: set[tuple[str, ...]] = set()
    for i in ranked:
        if len(chosen) == n:
            break
        if _figures(rows[i]) not in seen:
            chosen.append(i)
            seen.add(_figures(rows[i]))
    for i in ranked:  # too few distinct figures: fill with the rest
        if len(chosen) == n:
            break
        if i not in chosen:
            chosen.append(i)
    return chosen


_DOT_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\b(n\d+|cluster_\d+)\b')


def distinct_dot(dot: str) -> str:
    """`dot` (a `core.ir.to_dot` text) with node and cluster names made unique to its content,
    and a graph `id` that prefixes every SVG element id.

    `core.ir.to_dot` names nodes `n0, n1, ...` in every graph. The browser's graphviz chart
    (d3-graphviz) matches the old and the new drawing of one chart by those names, so when a
    page swaps one topology for another the new `n0` (say a parallel node) took over the old
    `n0`'s SVG shape (a pipeline's outline) and lost its own outline and fill. With names
    salted by a hash of the text, a different graph shares no name with the one it replaces,
    and two graphs on one page share no SVG ids. Quoted strings (labels, tooltips) are left
    as they are. `""` stays `""`.
    """
    if not dot:
        return dot
    salt = "g" + hashlib.sha256(dot.encode("utf-8")).hexdigest()[:8]

    def _sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            return m.group(0)
        if name.startswith("cluster_"):
            return f"cluster_{salt}_{name.removeprefix('cluster_')}"
        return f"{salt}_{name}"

    head, brace, body = dot.partition("{")
    if not brace:
        return dot
    return f'{head}{{\n  id="{salt}";{_DOT_TOKEN.sub(_sub, body)}'


def flip_counts(flips: pd.DataFrame) -> dict[str, int]:
    """How many examples fall in each `FLIP_KINDS` class (every class present, 0 if none)."""
    counts = dict.fromkeys(FLIP_KINDS, 0)
    if not flips.empty:
        for kind, n in flips["change"].value_counts().items():
            counts[str(kind)] = int(n)
    return counts


def flipped_examples(flips: pd.DataFrame, *, include_same: bool = False) -> pd.DataFrame:
    """The examples that flipped (right to wrong first, then wrong to right), or all when
    `include_same`; columns as `RunStore.compare_candidates`."""
    if flips.empty:
        return flips
    order = {k: i for i, k in enumerate(FLIP_KINDS)}
    df = flips if include_same else flips.loc[flips["change"].isin(FLIP_KINDS[:2])]
    df = df.assign(_o=[order.get(str(c), len(order)) for c in df["change"].tolist()]).sort_values(
        ["_o", "split", "example_id"]
    )
    return df.drop(columns="_o").reset_index(drop=True)
