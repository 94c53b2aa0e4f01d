"""The editor's cost figures: a static per-example estimate from a price table
(`estimate_cost`), the cost a search measured (`measured_cost`), and the accuracy's interval
(`accuracy_interval`). `studio.views.editor` re-exports them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.evaluation.pricing import ModelPrice
from core.ir import (
    AgentSpec,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    RefinementLoopSpec,
    RouterSpec,
)
from core.ir.models import child_slots

__all__ = [
    "CostEstimate",
    "MeasuredCost",
    "accuracy_interval",
    "calls_per_request",
    "estimate_cost",
    "measured_cost",
]


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """A static estimate of a topology's model cost per example, from a price table.

    Attributes:
        usd_per_example: the estimate (NaN when a model has no price).
        calls: model calls counted, per model name (requests times calls per request).
        unpriced: agents or models with no price (sorted).
        assumptions: the rule, in words, for the page.
    """

    usd_per_example: float
    calls: dict[str, float]
    unpriced: tuple[str, ...]
    assumptions: str


def _model_of(ref: str | AgentSpec, prices: Mapping[str, ModelPrice]) -> str:
    """The price-table model name of an agent reference: an inline agent's model, or the one
    table entry named `<provider>:<ref>` (how replay agents are priced), else the name itself."""
    if isinstance(ref, AgentSpec):
        return ref.model or "unknown"
    if ref in prices:
        return ref
    matches = [m for m in prices if m.split(":", 1)[-1] == ref]
    return matches[0] if len(matches) == 1 else ref


def calls_per_request(params: Mapping[str, Any]) -> dict[str, float]:
    """Model calls per agent request, from a problem's `[params.runs.<agent>]` tables.

    A problem may declare that one request of an agent stands for several model calls (for
    `gsm8k_replay` a `*_verification` agent is 100 samples and 100 verifier passes:
    `calls_per_request = 200`, see its `problem.toml` and README). Agents not listed count 1.

    Returns:
        agent name -> calls per request, e.g. `{"6b_verification": 200.0, ...}`; empty when the
        problem declares none.
    """
    runs = params.get("runs")
    out: dict[str, float] = {}
    if not isinstance(runs, Mapping):
        return out
    for name, table in runs.items():  # type: ignore[misc]
        if isinstance(table, Mapping) and isinstance(table.get("calls_per_request"), int | float):  # type: ignore[misc]
            out[str(name)] = float(table["calls_per_request"])  # type: ignore[index]
    return out


def estimate_cost(
    spec: AnyNode,
    prices: Mapping[str, ModelPrice],
    *,
    input_tokens: int = 200,
    output_tokens: int = 300,
    agent_names: Sequence[str] | None = None,
    calls: Mapping[str, float] | None = None,
) -> CostEstimate:
    """A rough static cost per example (not a bound: real token counts differ per example).

    Rule: a pipeline and a parallel run all their steps; a router runs its most expensive route
    (or the fallback) plus its classifier; a refinement loop runs its step and evaluator
    `max_iterations` times. Each agent request makes `calls[agent]` model calls (1 when not
    listed; see `calls_per_request`), each priced at `input_tokens` in and `output_tokens` out
    with the price of its model (`_model_of`). String classifiers and evaluators count as
    agents only when named in `agent_names` (when given).

    Args:
        spec: the topology.
        prices: model name -> `ModelPrice` (a problem's `prices`).
        input_tokens: assumed prompt tokens per call.
        output_tokens: assumed completion tokens per call.
        agent_names: the registered agent names, if known.
        calls: agent name -> model calls per request (a problem's usage model).
    """
    unpriced: set[str] = set()
    per_request = dict(calls or {})

    used: set[str] = set()

    def call(ref: str | AgentSpec) -> tuple[float, dict[str, float]]:
        model = _model_of(ref, prices)
        k = per_request.get(ref, 1.0) if isinstance(ref, str) else 1.0
        if isinstance(ref, str):
            used.add(ref)
        price = prices.get(model)
        if price is None:
            unpriced.add(model)
            return math.nan, {model: k}
        usd = (
            input_tokens * price.input_usd_per_1k + output_tokens * price.output_usd_per_1k
        ) / 1000
        return usd * k, {model: k}

    def is_agent(ref: str | AgentSpec | None) -> bool:
        if ref is None:
            return False
        return isinstance(ref, AgentSpec) or agent_names is None or ref in agent_names

    def add(a: dict[str, float], b: dict[str, float], k: float = 1.0) -> dict[str, float]:
        out = dict(a)
        for m, n in b.items():
            out[m] = out.get(m, 0.0) + n * k
        return out

    def cost(node: AnyNode) -> tuple[float, dict[str, float]]:
        if isinstance(node, AgentStepSpec):
            ref: str | AgentSpec = (
                node.agent_name if node.agent_name is not None else node.inline_spec
            )  # type: ignore[assignment]
            return call(ref)
        if isinstance(node, FunctionStepSpec):
            return 0.0, {}
        if isinstance(node, PipelineSpec | ParallelSpec):
            total, counted = 0.0, {}
            for _, child in child_slots(node):
                c, n = cost(child)
                total += c
                counted = add(counted, n)
            return total, counted
        if isinstance(node, RouterSpec):
            best = (0.0, {})
            for _, child in child_slots(node):
                c, n = cost(child)
                if math.isnan(c) or c >= best[0]:
                    best = (c, n)
            total, counted = best
            if is_agent(node.classifier):
                c, n = call(node.classifier)  # type: ignore[arg-type]
                total += c
                counted = add(counted, n)
            return total, counted
        assert isinstance(node, RefinementLoopSpec)
        c, n = cost(node.step)
        total, counted = c, dict(n)
        if is_agent(node.evaluator):
            ce, ne = call(node.evaluator)
            total += ce
            counted = add(counted, ne)
        k = node.max_iterations
        return total * k, {m: x * k for m, x in counted.items()}

    usd, counted = cost(spec)
    many = sorted(a for a, k in per_request.items() if k != 1 and a in used)
    return CostEstimate(
        usd_per_example=math.nan if unpriced else usd,
        calls=dict(sorted(counted.items())),
        unpriced=tuple(sorted(unpriced)),
        assumptions=(
            f"a rough guess, not a bound: every model call at {input_tokens} tokens in and "
            f"{output_tokens} out, a router's dearest route, loops to max_iterations"
            + (
                "; " + ", ".join(f"{a} = {per_request[a]:g} calls a request" for a in many)
                if many
                else "; one model call per agent request"
            )
        ),
    )


@dataclass(frozen=True, slots=True)
class MeasuredCost:
    """What a search measured for the same topology (same `spec_hash`).

    Attributes:
        usd_per_example: mean model cost per example, USD.
        n_examples: how many examples that mean is over.
        split: the split it was measured on (`validation` or `minibatch`).
        run_id: the run that measured it.
        candidate_idx: the candidate in that run.
    """

    usd_per_example: float
    n_examples: int
    split: str
    run_id: str
    candidate_idx: int


def measured_cost(archives: Mapping[str, Any], spec_hash: str) -> MeasuredCost | None:
    """The best measured cost of the topology with `spec_hash` in some run archives.

    Args:
        archives: run id -> that run's archive (`RunStore.archive`, a DataFrame with
            `spec_hash, candidate_idx, objective_split, n_examples, cost_usd`), newest run first.
        spec_hash: the topology's `core.ir.spec_hash` (ids do not change it).

    Returns:
        The measurement over the most examples (the full validation split before a minibatch;
        the newest run among equals), or None when no archive has a finite cost for it.
    """
    best: tuple[tuple[int, int, int], MeasuredCost] | None = None
    for order, (run_id, frame) in enumerate(archives.items()):
        if frame is None or len(frame) == 0 or "spec_hash" not in frame.columns:
            continue
        rows = frame[frame["spec_hash"] == spec_hash]
        for row in rows.itertuples(index=False):
            usd = float(getattr(row, "cost_usd", math.nan))
            n = getattr(row, "n_examples", 0)
            if not math.isfinite(usd) or n is None or (isinstance(n, float) and math.isnan(n)):
                continue
            split = str(getattr(row, "objective_split", ""))
            rank = (int(split == "validation"), int(n), -order)
            found = MeasuredCost(usd, int(n), split, str(run_id), int(row.candidate_idx))
            if best is None or rank > best[0]:
                best = (rank, found)
    return None if best is None else best[1]


def accuracy_interval(accuracy: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of an accuracy measured on `n` examples (95% for z = 1.96).

    Wilson (1927): centre `(p + z²/2n) / (1 + z²/n)`, half-width
    `z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)`; it stays inside [0, 1] and is honest at small n.

    Returns:
        `(low, high)`; `(nan, nan)` when `n < 1` or the accuracy is not finite.
    """
    if n < 1 or not math.isfinite(accuracy):
        return math.nan, math.nan
    p = min(max(accuracy, 0.0), 1.0)
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)
