"""The validation front's paired intervals, read from a run store (for `show`, `export` and the
Live page).

Every front candidate is compared with its cost-neighbours on the validation examples both were
scored on (`core.search.noise.front_noise`: 1,000 paired bootstrap resamples, seed `NOISE_SEED`,
95%); a candidate's per-example accuracy is the mean of its trials. The intervals depend only
on the stored results, so `show`, `export` and the studio give the same bounds for a run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from core.search.noise import DEFAULT_RESAMPLES, front_noise
from core.storage.base import RunStore

if TYPE_CHECKING:  # pandas only where a frame is returned: `show` reads the records (no pandas)
    import pandas as pd

__all__ = [
    "NOISE_COLUMNS",
    "NOISE_SEED",
    "front_noise_records",
    "front_noise_table",
    "with_front_noise",
]

NOISE_SEED = 0
"""Seed of every front interval's resampling: fixed, so the bounds are a function of the run."""

NOISE_COLUMNS = (
    "cheaper_idx",
    "gain_vs_cheaper",
    "gain_low",
    "gain_high",
    "dearer_idx",
    "vs_dearer_low",
    "vs_dearer_high",
    "within_noise",
)
"""The columns `front_noise_table` adds per front candidate (gains as accuracy fractions)."""


def _per_example(store: RunStore, run_id: str, idx: int) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for eid, _trial, acc in store.example_accuracies(run_id, idx, split="validation"):
        if acc is not None:
            sums.setdefault(eid, []).append(acc)
    means = {k: math.fsum(v) / len(v) for k, v in sums.items()}  # the mean of the trials
    return {k: v for k, v in means.items() if math.isfinite(v)}


def front_noise_records(
    store: RunStore, run_id: str, front: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`front_noise_table`'s rows as dicts (no pandas), from front rows with `candidate_idx`
    and `cost_usd` (USD per example), e.g. `RunStore.archive_records` rows with `on_front`."""
    costs = {str(int(r["candidate_idx"])): float(r["cost_usd"]) for r in front}
    if not costs:
        return []
    scores = {k: _per_example(store, run_id, int(k)) for k in costs}
    noise = front_noise(costs, scores, resamples=DEFAULT_RESAMPLES, seed=NOISE_SEED)
    rows: list[dict[str, Any]] = []
    for k in sorted(costs, key=lambda k: (costs[k], k)):
        f = noise[k]
        c, d = f.vs_cheaper, f.vs_dearer
        rows.append(
            {
                "candidate_idx": int(k),
                "cheaper_idx": None if f.cheaper is None else int(f.cheaper),
                "gain_vs_cheaper": math.nan if c is None else c.mean,
                "gain_low": math.nan if c is None else c.low,
                "gain_high": math.nan if c is None else c.high,
                "dearer_idx": None if f.dearer is None else int(f.dearer),
                "vs_dearer_low": math.nan if d is None else d.low,
                "vs_dearer_high": math.nan if d is None else d.high,
                "within_noise": f.within_noise,
            }
        )
    return rows


def front_noise_table(store: RunStore, run_id: str, front: pd.DataFrame) -> pd.DataFrame:
    """One row per front candidate: `candidate_idx` and `NOISE_COLUMNS`.

    Args:
        store: the run store.
        run_id: the run.
        front: the validation front (columns `candidate_idx`, `cost_usd`).

    Returns:
        The table, cheapest first; empty (with the columns) for an empty front. A pair with no
        common validation example has NaN bounds and is not within noise.
    """
    import pandas as pd

    cols = ["candidate_idx", *NOISE_COLUMNS]
    if front.empty:
        return pd.DataFrame(columns=cols)
    records = [
        {"candidate_idx": i, "cost_usd": c}
        for i, c in zip(front["candidate_idx"].tolist(), front["cost_usd"].tolist(), strict=True)
    ]
    rows = front_noise_records(store, run_id, records)
    out = pd.DataFrame(rows, columns=cols)
    for col in ("cheaper_idx", "dearer_idx"):
        out[col] = out[col].astype("Int64")
    return out


def with_front_noise(store: RunStore, run_id: str, front: pd.DataFrame) -> pd.DataFrame:
    """`front` with `NOISE_COLUMNS` joined on `candidate_idx` (its own row order kept)."""
    import pandas as pd

    if front.empty:
        return front.assign(**{c: pd.Series(dtype=object) for c in NOISE_COLUMNS})
    table = front_noise_table(store, run_id, front)
    return front.merge(table, on="candidate_idx", how="left")
