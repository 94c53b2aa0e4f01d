"""Resuming an interrupted run: what its recorded events give the new process.

The recorded example results go into the evaluation cache (no model call again), the recorded
proposals are served to the strategy by candidate index (no designer call again), the keys of
what was recorded are not emitted again, and `seq` continues after the last recorded event.
The learned artefacts the recorded proposals carry (`CandidateProposed.learned`) are read back
by digest, for the run to register before it checks or evaluates anything
(`core.search.learned`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from core.combinators.learned import LearnedCondition
from core.errors import SearchError
from core.evaluation._records import ExampleResult
from core.evaluation.cache import EvaluationCache
from core.evaluation.metrics import MetricBundle
from core.search._stream import EventKey
from core.search.events import ArchiveSnapshot, CandidateProposed, ExampleEvaluated, SearchEvent
from core.search.learned import artefacts_from_events
from core.search.strategies.base import Proposal
from core.storage.resume import ResumeState

__all__ = ["ResumePlan", "plan_resume", "proposal_from_event", "result_from_event"]


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """What a resumed run starts from.

    Attributes:
        run_id: the recorded run's id.
        next_seq: the first new event's `seq`.
        recorded: keys of the recorded events (see `core.search._stream`).
        proposals: recorded proposals by candidate index (`replayed=True`).
        wall_offset_s: seconds the recorded run had used (first to last event).
        learned: the learned artefacts the recorded proposals carry, by registered name.
    """

    run_id: str | None
    next_seq: int
    recorded: frozenset[EventKey]
    proposals: dict[int, Proposal]
    wall_offset_s: float
    learned: dict[str, LearnedCondition] = field(default_factory=dict[str, LearnedCondition])


def plan_resume(
    events: Sequence[SearchEvent], run_id: str | None, cache: EvaluationCache | None
) -> ResumePlan:
    """Read recorded events into a `ResumePlan`, filling `cache` with the recorded results.

    Raises:
        SearchError: the events are of another run than `run_id`, or results were recorded
            but there is no cache to serve them from.
    """
    state = ResumeState.from_events(list(events))
    if run_id is not None and state.run_id is not None and run_id != state.run_id:
        raise SearchError(
            f"resume events are of run {state.run_id!r}, not {run_id!r}: resume that run"
        )
    if state.evaluations and cache is None:
        raise SearchError("resuming needs an evaluator with an evaluation cache")
    recorded: set[EventKey] = set()
    for key, ev in state.evaluations.items():
        if cache is not None and cache.get(*key) is None:
            cache.put(result_from_event(ev))
        recorded.add(("e", *key))
    proposals: dict[int, Proposal] = {}
    for idx, p in state.proposals.items():
        recorded.add(("p", idx))
        proposals[idx] = proposal_from_event(p)
    for cand_idx, split in state.results:
        recorded.add(("c", cand_idx, split))
    n_snapshots = sum(1 for e in events if isinstance(e, ArchiveSnapshot))
    recorded.update(("s", i) for i in range(1, n_snapshots + 1))
    wall = 0.0
    if state.started is not None and events:
        wall = max(0.0, events[-1].ts - state.started.ts)
    learned = artefacts_from_events(events)
    return ResumePlan(state.run_id, state.next_seq, frozenset(recorded), proposals, wall, learned)


def result_from_event(ev: ExampleEvaluated) -> ExampleResult:
    """The cache record of a recorded example result (what a resumed run is served)."""
    return ExampleResult(
        spec_hash=ev.spec_hash,
        example_id=ev.example_id,
        trial=ev.trial,
        split=ev.split,
        bundle=MetricBundle(
            accuracy=ev.accuracy,
            cost_usd=ev.cost_usd,
            latency_ms=ev.latency_ms,
            status=ev.status,
            error=ev.error,
            input_tokens=ev.input_tokens,
            output_tokens=ev.output_tokens,
        ),
        requests=ev.requests,
        blank=ev.status == "degenerate",
        output_summary=ev.output_summary,
        trace=list(ev.trace),
    )


def proposal_from_event(ev: CandidateProposed) -> Proposal:
    """A recorded proposal, as a strategy replays it (its design cost was paid then)."""
    rejected = ev.status == "rejected"
    return Proposal(
        text=ev.spec_json,
        parent_idx=ev.parent_idx,
        operator=ev.operator,
        thought=ev.thought,
        design_cost_usd=ev.design_cost_usd,
        design_requests=ev.design_requests,
        design_input_tokens=ev.design_input_tokens,
        design_output_tokens=ev.design_output_tokens,
        reason=(ev.reason or "rejected") if rejected else None,
        replayed=True,
    )
