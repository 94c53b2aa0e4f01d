"""Side-by-side comparison of two to four topologies: metrics, graphs, and flipped examples."""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from studio.views.tables import candidate_options

__all__ = [
    "COMPARE_METRICS",
    "FLIP_KINDS",
    "LOWER_IS_BETTER",
    "CompareItem",
    "PairedTest",
    "compare_metrics",
    "delta_table",
    "flip_splits",
    "mcnemar_exact_p",
    "paired_test",
    "sample_note",
    "spec_differences",
    "split_note",
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


SPLIT_ORDER: tuple[str, ...] = ("validation", "minibatch", "test")
"""Splits in the order the compare page offers them (others follow, sorted)."""


def flip_splits(flips: pd.DataFrame) -> list[str]:
    """The splits both compared candidates were scored on, in `SPLIT_ORDER` (then sorted).

    Flip counts are per split: pooled, the 300 validation and 1,019 test examples of
    gsm8k_replay added up to 1,319 while the metrics table said 300.
    A split on which only one side has results is left out (nothing pairs there).
    """
    if flips.empty:
        return []
    paired = flips.loc[~flips["change"].isin(("only_a", "only_b"))]
    present = {str(x) for x in paired["split"].tolist()}
    known = [x for x in SPLIT_ORDER if x in present]
    return known + sorted(present - set(known))


def split_note(split: str, example_ids: Sequence[str]) -> str:
    """A caption for a split whose example ids name another split (gsm8k_replay's validation
    problems are drawn from GSM8K's test file, so their ids read `gsm8k-test-0048`), else ""."""
    other = [s for s in SPLIT_ORDER if s != split and s != "minibatch"]
    if any(f"-{o}-" in str(e) for e in example_ids[:50] for o in other):
        return (
            f"Example ids are the source file's names: this problem draws its {split} split "
            "from the dataset's test file (see the problem's [gold] split rule), so ids like "
            "`gsm8k-test-0048` appear under validation."
        )
    return ""


def mcnemar_exact_p(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value of `b` and `c` discordant pairs.

    Under the null hypothesis (both topologies equally accurate) each discordant example is
    right in A only with probability 1/2, so `b ~ Binomial(b + c, 1/2)`; the two-sided p is
    `min(1, 2 * P[X <= min(b, c)])` (McNemar 1947; the exact form for small counts, as
    `scipy.stats.binomtest(b, b + c).pvalue` computes it). No discordant pair: 1.0.
    Exact integer arithmetic, so it is exact at any count.
    """
    if b < 0 or c < 0:
        raise ValueError(f"counts must be >= 0, got {b}, {c}")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, float(2 * tail) / float(2**n)) if 2 * k != n else 1.0


@dataclass(frozen=True, slots=True)
class PairedTest:
    """McNemar's exact test of the accuracy difference on the examples both were scored on.

    Attributes:
        n: paired examples.
        a_only: right in A, wrong in B.
        b_only: wrong in A, right in B.
        p_value: two-sided exact p (`mcnemar_exact_p`).
        text: one sentence for the page.
    """

    n: int
    a_only: int
    b_only: int
    p_value: float
    text: str


def paired_test(counts: Mapping[str, int], name_a: str = "A", name_b: str = "B") -> PairedTest:
    """The paired test of a `flip_counts` result (one split)."""
    b, c = int(counts.get("right_to_wrong", 0)), int(counts.get("wrong_to_right", 0))
    n = b + c + int(counts.get("both_right", 0)) + int(counts.get("both_wrong", 0))
    p = mcnemar_exact_p(b, c)
    if b == c:
        lead = f"{name_a} and {name_b} are right on different examples equally often"
    else:
        better = name_a if b > c else name_b
        lead = f"{better} is right on {abs(b - c)} more of the {b + c} examples where they differ"
    verdict = (
        "a difference unlikely by chance (p < 0.05)"
        if p < 0.05
        else "not enough to call either better (p >= 0.05)"
    )
    text = f"McNemar exact test on {n} paired examples: {lead}; two-sided p = {p:.4g}, {verdict}."
    return PairedTest(n, b, c, p, text)


LOWER_IS_BETTER: frozenset[str] = frozenset(
    {"cost_usd", "latency_ms", "n_agents", "depth", "error_rate"}
)
"""Figures where less is better (the rest of the numeric `COMPARE_METRICS`: more is better)."""

_DELTA_METRICS = ("accuracy", "cost_usd", "latency_ms", "aggregate_score", "error_rate", "n_agents")


def _delta_text(name: str, d: float) -> str:
    if name in ("accuracy", "error_rate"):
        return f"{d * 100:+.2f} pp"
    if name.endswith("usd"):
        return f"{'+' if d >= 0 else '-'}${abs(d):,.4f}"
    if name.endswith("_ms"):
        return f"{d:+,.0f} ms"
    if float(d).is_integer():
        return f"{int(d):+d}"
    return f"{d:+.4f}"


def delta_table(
    rows: Sequence[Mapping[str, Any]], labels: Sequence[str], baseline: int = 0
) -> pd.DataFrame:
    """Each figure against a baseline: `value (delta)` per topology, the best marked `★`.

    Args:
        rows: archive rows (as for `compare_metrics`).
        labels: column labels, unique.
        baseline: the index of the baseline row (its cells show the value and `baseline`).

    Returns:
        One row per figure in `_DELTA_METRICS`, one text column per topology; the best value of
        a row (highest, or lowest for `LOWER_IS_BETTER`) ends in ` ★` (all ties marked; none
        when every value is missing or all are equal).
    """
    if not 0 <= baseline < len(rows):
        raise ValueError(f"baseline {baseline} is not one of the {len(rows)} rows")
    out: dict[str, list[str]] = {label: [] for label in labels}
    for m in _DELTA_METRICS:
        vals: list[float | None] = []
        for r in rows:
            v = r.get(m)
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))
            vals.append(float(v) if ok else None)  # type: ignore[arg-type]
        finite = [v for v in vals if v is not None]
        best = None
        if finite and len(set(finite)) > 1:
            best = min(finite) if m in LOWER_IS_BETTER else max(finite)
        base = vals[baseline]
        for i, (label, v) in enumerate(zip(labels, vals, strict=True)):
            if v is None:
                out[label].append("-")
                continue
            cell = format_metric(m, v)
            if i == baseline:
                cell += " (baseline)"
            elif base is not None:
                cell += f" ({_delta_text(m, v - base)})"
            if best is not None and v == best:
                cell += " ★"
            out[label].append(cell)
    return pd.DataFrame(out, index=list(_DELTA_METRICS), dtype=str)


def _plain_spec(text: str | None) -> list[str]:
    """A stored spec's JSON as lines, node ids left out (ids do not change a topology)."""
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return text.splitlines()

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "id" and x is not None}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return json.dumps(strip(data), indent=2, sort_keys=True).splitlines()


def spec_differences(text_a: str | None, text_b: str | None, label_a: str, label_b: str) -> str:
    """Only the lines in which two specs differ (a unified diff with one line of context, node
    ids and unset fields left out); "" when the topologies are the same."""
    lines = difflib.unified_diff(
        _plain_spec(text_a), _plain_spec(text_b), fromfile=label_a, tofile=label_b, n=1, lineterm=""
    )
    return "\n".join(lines)


def sample_note(rows: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> str:
    """A caption when the compared figures rest on different samples, else "".

    An editor evaluation of the first 20 validation examples beside a search candidate scored
    on all 300 (or a minibatch estimate beside a full score) compares means over different
    problems; the flips below pair examples, the metrics table does not.

    Args:
        rows: archive rows with `n_examples` and `objective_split`.
        labels: their labels, as in the metrics table.
    """
    samples = [
        (str(r.get("objective_split") or "?"), format_metric("n_examples", r.get("n_examples")))
        for r in rows
    ]
    if len(set(samples)) <= 1:
        return ""
    parts = ", ".join(
        f"{label} on {n} {split}" for label, (split, n) in zip(labels, samples, strict=True)
    )
    return (
        f"These figures rest on different examples ({parts}): their differences mix the "
        "topologies with the problems drawn. The flips below compare the examples both were "
        "scored on."
    )
