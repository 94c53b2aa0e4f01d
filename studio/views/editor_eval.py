"""The editor's evaluations as first-class results: compared with the
candidate they were edited from, example by example, and a cost estimate calibrated against
what the store measured for the same agents.

Pure functions over store frames; `pages/editor.py` wires them to widgets.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from core.ir import AgentStepSpec, AnyNode, RefinementLoopSpec, RouterSpec
from core.ir.models import child_slots
from studio.views.compare import FLIP_KINDS, _delta_text, format_metric

__all__ = [
    "PARENT_METRICS",
    "CalibrationSample",
    "CostCalibration",
    "ParentComparison",
    "agent_names_of",
    "calibrate_cost",
    "parent_comparison",
]

PARENT_METRICS: tuple[str, ...] = ("accuracy", "cost_usd", "latency_ms")
"""The figures compared with the parent, in table order."""


@dataclass(frozen=True, slots=True)
class ParentComparison:
    """An editor evaluation against its parent candidate, on the examples both were scored on.

    Attributes:
        table: one row per `PARENT_METRICS` figure, columns `parent`, `this topology`, `change`
            (text: `format_metric` values, the change as `+12.50 pp`, `-$0.0300`, `+250 ms`).
        figures: figure -> `(parent mean, this mean, this - parent)` over the paired examples
            (accuracy a share in [0, 1], cost USD per example, latency ms per example).
        counts: `FLIP_KINDS` -> number of paired examples (`only_a`/`only_b` are 0: the
            table is over paired examples only).
        n_paired: examples both were scored on (same split and example id).
        n_only_this: examples of the evaluation the parent was never scored on.
        split: the evaluation's split.
    """

    table: pd.DataFrame
    figures: dict[str, tuple[float, float, float]]
    counts: dict[str, int]
    n_paired: int
    n_only_this: int
    split: str


def _per_example(frame: pd.DataFrame, split: str) -> pd.DataFrame:
    """Trials averaged per example on `split`: index `example_id`, the `PARENT_METRICS`."""
    mine = frame.loc[frame["split"] == split, ["example_id", *PARENT_METRICS]]
    return mine.groupby("example_id", sort=True).mean(numeric_only=True)


def parent_comparison(
    parent_examples: pd.DataFrame,
    examples: pd.DataFrame,
    split: str,
    *,
    threshold: float = 0.5,
) -> ParentComparison:
    """Compare an evaluation with its parent candidate on the examples both were scored on.

    The parent was usually scored on more examples (the whole validation split) than the
    editor's evaluation (the first 20): its figures are taken on the evaluation's examples
    only, so the change is a paired one, not two means over different problems. Trials are
    averaged per example; an example is right when its mean accuracy is finite and at least
    `threshold` (as `RunStore.compare_candidates` counts).

    Args:
        parent_examples: the parent's `RunStore.candidate_examples` (columns `split,
            example_id, accuracy, cost_usd, latency_ms`).
        examples: the evaluation's, same columns.
        split: the evaluation's split.
        threshold: the accuracy at which an example counts as right.

    Returns:
        The comparison; with no paired example its figures are NaN and its counts 0.

    Raises:
        ValueError: a frame lacks one of the columns named above.
    """
    need = {"split", "example_id", *PARENT_METRICS}
    for name, frame in (("parent_examples", parent_examples), ("examples", examples)):
        missing = sorted(need - set(frame.columns))
        if missing:
            raise ValueError(f"{name} lacks column(s) {', '.join(missing)}")
    a = _per_example(parent_examples, split)
    b = _per_example(examples, split)
    paired = sorted(set(a.index) & set(b.index))
    a, b_paired = a.loc[paired], b.loc[paired]
    figures: dict[str, tuple[float, float, float]] = {}
    rows: dict[str, list[str]] = {"parent": [], "this topology": [], "change": []}
    for m in PARENT_METRICS:
        pa = float(a[m].mean()) if paired else math.nan
        pb = float(b_paired[m].mean()) if paired else math.nan
        d = pb - pa
        figures[m] = (pa, pb, d)
        rows["parent"].append(format_metric(m, pa))
        rows["this topology"].append(format_metric(m, pb))
        rows["change"].append("-" if math.isnan(d) else _delta_text(m, d))
    counts = dict.fromkeys(FLIP_KINDS, 0)
    for ex in paired:
        ra = bool(math.isfinite(a.at[ex, "accuracy"]) and a.at[ex, "accuracy"] >= threshold)
        rb = bool(
            math.isfinite(b_paired.at[ex, "accuracy"]) and b_paired.at[ex, "accuracy"] >= threshold
        )
        kind = (
            "both_right"
            if ra and rb
            else "right_to_wrong"
            if ra
            else "wrong_to_right"
            if rb
            else "both_wrong"
        )
        counts[kind] += 1
    return ParentComparison(
        table=pd.DataFrame(rows, index=list(PARENT_METRICS), dtype=str),
        figures=figures,
        counts=counts,
        n_paired=len(paired),
        n_only_this=len(set(b.index) - set(paired)),
        split=split,
    )


def agent_names_of(spec: AnyNode) -> frozenset[str]:
    """The registered agent names a topology uses: agent steps, and routers' classifiers and
    loops' evaluators that name an agent in `agent_names` terms (strings; callables included,
    the caller intersects with its registry). Inline agents count by their model, as
    `inline:<model>`."""
    out: set[str] = set()

    def walk(node: AnyNode) -> None:
        if isinstance(node, AgentStepSpec):
            if node.agent_name is not None:
                out.add(node.agent_name)
            elif node.inline_spec is not None:
                out.add(f"inline:{node.inline_spec.model or 'unknown'}")
        if isinstance(node, RouterSpec) and isinstance(node.classifier, str):
            out.add(node.classifier)
        if isinstance(node, RefinementLoopSpec) and isinstance(node.evaluator, str):
            out.add(node.evaluator)
        for _, child in child_slots(node):
            walk(child)

    walk(spec)
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class CalibrationSample:
    """One measured topology: its static estimate and what a run measured.

    Attributes:
        static_usd: `estimate_cost(...).usd_per_example` of its spec, USD.
        measured_usd: the run's mean cost per example, USD.
        agents: `agent_names_of` its spec (restricted to registered agents).
        label: where it was measured, e.g. `"20250101-120000-abc123 #1"`.
    """

    static_usd: float
    measured_usd: float
    agents: frozenset[str]
    label: str = ""


@dataclass(frozen=True, slots=True)
class CostCalibration:
    """A static estimate corrected by measured costs of the same agents.

    Attributes:
        usd_per_example: the calibrated estimate (static times `factor`), USD; NaN when no
            sample fits (then the page shows no dollar estimate at all).
        factor: the median of measured / static over the samples used; NaN when none.
        n_samples: how many measured topologies the factor comes from.
        low: the smallest measured / static ratio among them (NaN when none).
        high: the largest (NaN when none).
        text: the line for the page, saying what the figure is and where it comes from.
    """

    usd_per_example: float
    factor: float
    n_samples: int
    low: float
    high: float
    text: str


def calibrate_cost(
    static_usd: float,
    agents: frozenset[str],
    samples: Sequence[CalibrationSample],
    *,
    where: str = "the store",
) -> CostCalibration:
    """Calibrate a static cost estimate against measured costs of topologies using the same
    agents.

    The static rule (fixed tokens per call) was 4 to 6 times off the measured cost on
    gsm8k_replay. Its error is mostly per agent (real prompt and answer
    lengths), so the samples that calibrate a topology are the measured topologies whose
    agents are all among its own (`sample.agents <= agents`, at least one agent), with a
    finite positive static estimate and a finite measured cost. The factor is the median of
    their measured / static ratios (robust to one odd candidate); the calibrated estimate is
    `static_usd * factor`. With no such sample the estimate is dropped (NaN), not guessed.

    Args:
        static_usd: the topology's static estimate, USD per example.
        agents: the topology's agents (`agent_names_of`, registered ones).
        samples: measured topologies (see `CalibrationSample`).
        where: the data's origin for the text, e.g. `"the 20 newest runs of gsm8k_replay"`.

    Returns:
        The calibration, with its text for the page.
    """
    ratios = sorted(
        s.measured_usd / s.static_usd
        for s in samples
        if s.agents
        and s.agents <= agents
        and math.isfinite(s.static_usd)
        and s.static_usd > 0
        and math.isfinite(s.measured_usd)
        and s.measured_usd >= 0
    )
    if not ratios or not math.isfinite(static_usd):
        why = (
            "a model has no price"
            if not math.isfinite(static_usd)
            else f"no topology using only these agents ({', '.join(sorted(agents)) or 'none'}) "
            f"has a measured cost in {where}"
        )
        return CostCalibration(
            math.nan,
            math.nan,
            0,
            math.nan,
            math.nan,
            "No cost estimate: " + why + ". The static rule alone was 4 to 6 times off the "
            "measured cost, so it is not shown; evaluate to measure it.",
        )
    factor = float(statistics.median(ratios))
    usd = static_usd * factor
    spread = f"ratios {ratios[0]:.3g} to {ratios[-1]:.3g}" if len(ratios) > 1 else "one measurement"
    return CostCalibration(
        usd,
        factor,
        len(ratios),
        ratios[0],
        ratios[-1],
        f"Calibrated estimate: {format_metric('cost_usd', usd)} per example (the static rule's "
        f"{format_metric('cost_usd', static_usd)} times {factor:.3g}, the median measured / "
        f"static ratio of {len(ratios)} topolog{'y' if len(ratios) == 1 else 'ies'} using only "
        f"these agents in {where}; {spread}).",
    )
