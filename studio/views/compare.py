"""Side-by-side comparison of two to four topologies: metrics, graphs, and flipped examples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

__all__ = [
    "COMPARE_METRICS",
    "FLIP_KINDS",
    "CompareItem",
    "compare_metrics",
    "flip_counts",
    "flipped_examples",
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


def compare_metrics(rows: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> pd.DataFrame:
    """Metrics side by side: one row per metric (`COMPARE_METRICS`), one column per topology.

    Args:
        rows: each topology's archive row (`RunStore.archive`), as mappings.
        labels: a column label per row (e.g. `"run …3f9a #7"`); must be unique.

    Raises:
        ValueError: the counts differ or labels repeat.
    """
    if len(rows) != len(labels):
        raise ValueError(f"{len(rows)} rows but {len(labels)} labels")
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels must be unique: {list(labels)}")
    data = {
        label: [row.get(m) for m in COMPARE_METRICS]
        for row, label in zip(rows, labels, strict=True)
    }
    return pd.DataFrame(data, index=list(COMPARE_METRICS), dtype=object)


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
