"""The Runtime page's state and steps: design a topology for a request from a
run's seed library, run it through the problem's evaluator, and learn from the outcome.

A `RuntimeSession` is one run's seed library (`core.runtime_design.seed_library_from_run`: the
run's validated Pareto front) with a `LibraryDesigner` over it and an `InMemoryLRU` cache on the
normalised request. The steps are those of `topology-studio serve-topology`
(`studio.cli.library.serve_requests`), one request at a time so the page can show each:

- `design_request`: the designer's pick (the cache first, else the library rule), with why
  (`DesignResult.thought`: the library entry and its figures, or the hit's similarity and
  reliability). A design is a cache lookup: it moves the cache's hit or miss counter.
- `run_design`: the problem's evaluator runs the spec on the request (the gold example with that
  exact question text, so the answer is scored; else the bare question, unscored), with its
  trace, and the outcome is stored into the cache (status ok: a success, which adds the entry;
  else a failure, which decays it), as `serve_requests` does.
- `mark_output`: a verdict on the last output (good: a success stored; bad: the entry decayed,
  reliability times `DECAY_FACTOR` = 0.7), the judge's feedback of `TopologyOrchestrator`.

Pure of Streamlit; the page keeps one session per run in `st.session_state`.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from core.evaluation.metrics import GoldExample
from core.ir import TopologySpec, assign_ids, spec_hash, to_dot
from core.problems import Problem
from core.runtime_design import InMemoryLRU, LibraryDesigner, seed_library_from_run
from core.runtime_design.caches import normalise_goal
from core.runtime_design.designer import DesignResult, LibraryEntry
from core.storage.base import RunStore
from studio.cli.library import gold_by_question
from studio.views.drilldown import TraceDetail, answer_text, trace_detail

__all__ = [
    "CACHE_COLUMNS",
    "DEFAULT_CACHE_SIZE",
    "RuntimeRun",
    "RuntimeSession",
    "cache_table",
    "design_dot",
    "design_request",
    "gold_questions",
    "library_table",
    "mark_output",
    "open_session",
    "run_design",
]

DEFAULT_CACHE_SIZE = 1000
"""Requests the page's cache keeps (the `serve-topology --cache-size` default)."""

CACHE_COLUMNS = ("request", "library entry", "spec", "reliability")
"""The cache table's columns, least recently used first."""


@dataclass
class RuntimeRun:
    """One design run on one request, and how it went."""

    design: DesignResult
    spec_hash: str
    """The hash of the spec run (`core.ir.spec_hash`, 64 hex)."""
    status: str
    """`"ok"`, `"error"`, `"degenerate"`, `"invalid"`, or `"rejected"` (nothing ran)."""
    error: str | None
    answer: str
    """The answer read from the output summary (`answer_text`), "" when nothing ran."""
    gold: str | None
    """The gold answer when the request is a gold question, else None."""
    accuracy: float | None
    """The score in [0, 1]; None when unscored (no gold example with this question)."""
    cost_usd: float
    """USD of this run (NaN when nothing ran)."""
    latency_ms: float
    """Latency of this run, ms (the replayed model latency; NaN when nothing ran)."""
    trace: TraceDetail
    """The run's steps and the graph with the path taken."""
    verdict: str | None = None
    """`"good"` or `"bad"` once the output was marked, else None."""


@dataclass
class RuntimeSession:
    """One run's seed library, its designer and cache, and the last design and run."""

    run_id: str
    problem: Problem
    library: list[LibraryEntry]
    cache: InMemoryLRU
    designer: LibraryDesigner
    gold: dict[str, tuple[str, GoldExample]]
    """Question text -> (split, gold example) (`gold_by_question`)."""
    served: dict[str, str] = field(default_factory=dict[str, str])
    """Normalised request -> hash of the spec stored for it (for the cache table)."""
    last_design: DesignResult | None = None
    last_limits: tuple[float | None, float | None] = (None, None)
    """(budget USD, latency ms) the last design was made for."""
    last_run: RuntimeRun | None = None


def open_session(
    store: RunStore, run_id: str, problem: Problem, *, cache_size: int = DEFAULT_CACHE_SIZE
) -> RuntimeSession:
    """A session over run `run_id`'s validated front, for `problem` (the run's problem).

    Raises:
        SeedLibraryError: the run cannot be a seed library (no such run, no validated front).
        ValueError: a library entry names something the problem's registries lack.
    """
    library = seed_library_from_run(store, run_id)
    cache = InMemoryLRU(cache_size)
    try:
        designer = LibraryDesigner(
            library, problem.callable_registry, problem.agent_registry, cache=cache
        )
    except ValueError as exc:
        raise ValueError(f"run {run_id!r}'s library does not fit {problem.name}: {exc}") from exc
    return RuntimeSession(run_id, problem, library, cache, designer, gold_by_question(problem))


def library_table(session: RuntimeSession) -> pd.DataFrame:
    """The seed library: entry (1-based), label, spec hash (12 hex), accuracy, cost_usd (USD
    per problem), latency_ms (ms per problem)."""
    return pd.DataFrame(
        [
            {
                "entry": i,
                "label": e.label or "",
                "spec": spec_hash(e.spec)[:12],
                "accuracy": e.accuracy,
                "cost_usd": e.cost_usd,
                "latency_ms": e.latency_ms,
            }
            for i, e in enumerate(session.library, start=1)
        ],
        columns=["entry", "label", "spec", "accuracy", "cost_usd", "latency_ms"],
    )


def gold_questions(
    session: RuntimeSession, split: str = "validation", limit: int = 50
) -> list[str]:
    """The first `limit` question texts of the problem's `split` with a gold answer."""
    return [q for q, (s, _) in session.gold.items() if s == split][:limit]


def design_request(
    session: RuntimeSession,
    question: str,
    *,
    budget_usd: float | None = None,
    latency_ms: float | None = None,
) -> DesignResult:
    """The designer's pick for `question` under the limits (USD, ms; None: none), kept as the
    session's last design (the last run is cleared).

    Raises:
        ValueError, TypeError: the question is empty, or a limit is negative or not finite.
    """
    design = asyncio.run(
        session.designer.design(question, budget_usd=budget_usd, latency_ms=latency_ms)
    )
    session.last_design = design
    session.last_limits = (budget_usd, latency_ms)
    session.last_run = None
    return design


def design_dot(spec: TopologySpec, title: str | None = None) -> str:
    """The DOT graph of a designed spec (ids assigned, so a trace can be drawn on it)."""
    return to_dot(assign_ids(spec), title=title)


def run_design(session: RuntimeSession, design: DesignResult) -> RuntimeRun:
    """Run `design.spec` on its request through the problem's evaluator (with the trace) and
    store the outcome into the cache (see the module docstring); kept as the last run.

    Returns:
        The `RuntimeRun`; a failed run is in it (status and error), never raised.
    """
    question = design.goal
    matched = session.gold.get(question)
    if matched is not None:
        split, example = matched
    else:
        split, example = "request", GoldExample(input=question, id="request")
    evaluator = session.problem.evaluator().with_options(capture_traces=True)
    evaluation = asyncio.run(evaluator.evaluate(design.spec, [example], split=split))
    digest = spec_hash(design.spec)
    gold = None if matched is None else _text(matched[1].expected)
    if evaluation.rejected or not evaluation.results:
        run = RuntimeRun(
            design=design,
            spec_hash=digest,
            status="rejected",
            error=evaluation.reason,
            answer="",
            gold=gold,
            accuracy=None if matched is None else 0.0,
            cost_usd=math.nan,
            latency_ms=math.nan,
            trace=trace_detail(design.spec, None, session.problem.prices),
        )
    else:
        result: Any = evaluation.results[0]
        accuracy: float | None = None
        if matched is not None:
            accuracy = float(result.accuracy) if math.isfinite(result.accuracy) else 0.0
        run = RuntimeRun(
            design=design,
            spec_hash=digest,
            status=str(result.status),
            error=result.error,
            answer=answer_text(result.output_summary) if result.status == "ok" else "",
            gold=gold,
            accuracy=accuracy,
            cost_usd=float(result.cost_usd),
            latency_ms=float(result.latency_ms),
            trace=trace_detail(design.spec, result.trace, session.problem.prices),
        )
    ok = run.status == "ok"
    asyncio.run(session.cache.store(question, design.spec, ok))
    if ok:
        session.served[normalise_goal(question)] = digest
    session.last_run = run
    return run


def mark_output(session: RuntimeSession, good: bool) -> float | None:
    """A verdict on the last run's output: good stores a success for its request and spec,
    bad decays the request's cache entry (`cache.store(goal, spec, False)`).

    Returns:
        The entry's reliability afterwards, None when the cache does not hold the request.

    Raises:
        ValueError: nothing has run yet in this session.
    """
    run = session.last_run
    if run is None:
        raise ValueError("no output to mark: run a request first")
    asyncio.run(session.cache.store(run.design.goal, run.design.spec, good))
    if good:
        session.served[normalise_goal(run.design.goal)] = run.spec_hash
    run.verdict = "good" if good else "bad"
    return session.cache.reliability(run.design.goal)


def cache_table(session: RuntimeSession) -> pd.DataFrame:
    """The cache's entries, least recently used first: the normalised request, its library
    entry (1-based label, `-` outside the library), spec hash (12 hex) and reliability in
    [0, 1] (entries below the cache's `min_reliability`, 0.3, are no longer returned)."""
    by_hash = {spec_hash(e.spec): i for i, e in enumerate(session.library, start=1)}
    rows: list[dict[str, Any]] = []
    for key in session.cache.keys():
        digest = session.served.get(key, "")
        i = by_hash.get(digest)
        label = session.library[i - 1].label if i is not None else None
        rows.append(
            {
                "request": key,
                "library entry": "-" if i is None else f"{i} ({label})" if label else str(i),
                "spec": digest[:12],
                "reliability": session.cache.reliability(key),
            }
        )
    return pd.DataFrame(rows, columns=list(CACHE_COLUMNS))


def _text(value: Any) -> str:
    if value is None:
        return ""
    answer = getattr(value, "answer", None)
    return str(answer if answer is not None else value)
