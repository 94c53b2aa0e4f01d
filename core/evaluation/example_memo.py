"""The example memo: a run whose every model call the call cache answers is not run again.

Why: in a warm search (every call a call-cache hit) an example run is still the whole runtime,
a span and a coroutine per step, to replay recorded calls: about 90% of a warm default search's
CPU time for lookups and a score. A run is a pure function of its spec, its example, its trial
and the answers its calls get, so a run whose calls the cache holds gives, run again, the same
result; the memo keeps that result and answers the rerun with it.

**What is kept.** After a run (`record`), when it made model calls and every one is in the
call cache now (hits, and misses stored after they returned: `CallContext.unanswered` is 0) or
is a raced call (`CallContext.raced`: a replayed model's call inside a `fastest` race, which
always runs, on a simulated clock that decides the race by event-loop turns: `core.agents.replay`),
nothing in it depended on the wall clock (`CallContext.unrepeatable`: a `Parallel` or loop
deadline fired; or, inside a race, a raced call slept real
time (time scale > 0), had no quote or waited for a provider's lease, a model that is not
replayed was called, an async function, condition, classifier, evaluator or state updater was
awaited, or another race ran in a race's branch), the requests those calls
recorded are all the run's requests (no model call bypassed the cache),
its latency is model time (not wall time, which a rerun would measure anew), it was not cut by
the example deadline, its status is not `error` (an exception may be transient), and no spans
are kept (`capture_traces` off): its figures (accuracy, cost, latency, status and reason,
tokens, requests, blank, output summary) and the number of calls it made. They are kept in the
call cache itself, as a `CallRecord` under `memo_key` (prefix `MEMO_PREFIX`, never a call key's
64-hex form), so they are written, read back, shared with forked workers and removed with the
call records they depend on, in the same namespace (the problem's `config_hash`, so new
problem code, data or prices never answer from an old memo).

**What a hit gives** (`lookup`): the `ExampleResult` the run gave, rebuilt with this
evaluation's spec hash, split and structure, `cached` False (it is the run's own result, not
the evaluation cache's), and the call cache's counters advanced by the run's calls as `hits`
(what running it again would count, but for a race's calls: a rerun makes them again, a memo
hit replays nothing: in a warm default search on gsm8k_replay they were 3,057 pydantic-ai runs,
about 35% of its time in a pyinstrument profile, measured 2026-12-07). The key adds to the spec
hash (prompt overrides included), the example id and the trial what a problem's `config_hash`
leaves out but decides a result: the latency source and the example deadline (`[evaluation]`).

What a hit does not do: pass a replayed model's real-time sleep (`models.time_scale` > 0
sleeps every replayed call; the memo answers at once). The key leaves the time scale out, so a
run with a race kept at time scale 0 answers the same run at time scale > 0 with the simulated
clock's outcome, where a run made afresh would be decided in part by the wall clock (and is
never kept itself): `tests/evaluation/test_example_memo_races.py` pins it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from core.agents.call_cache import CallCache, CallContext, CallRecord
from core.evaluation._records import ExampleResult
from core.evaluation.metrics import MetricBundle

__all__ = ["MEMO_PREFIX", "MemoContext", "lookup", "memo_key", "record"]


class MemoContext(Protocol):
    """What the memo reads of an evaluation's runs (`core.evaluation._run.RunContext` has it;
    a protocol, as `_run` records into the memo)."""

    @property
    def spec_hash(self) -> str: ...
    @property
    def split(self) -> str: ...
    @property
    def n_agents(self) -> int: ...
    @property
    def depth(self) -> int: ...
    @property
    def latency_source(self) -> str: ...
    @property
    def timeout_s(self) -> float | None: ...
    @property
    def capture_traces(self) -> bool: ...
    @property
    def call_cache(self) -> CallCache | None: ...


MEMO_PREFIX = "example:"
"""How a memo entry's key starts in the call cache (a call key is 64 hex digits)."""


def memo_key(ctx: MemoContext, example_id: str, trial: int) -> str:
    """`MEMO_PREFIX` + the sha256 (hex) of the JSON list `[spec_hash, example_id, trial,
    latency_source, timeout_s]`."""
    text = json.dumps(
        [ctx.spec_hash, example_id, trial, ctx.latency_source, ctx.timeout_s],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return MEMO_PREFIX + hashlib.sha256(text.encode()).hexdigest()


def record(
    ctx: MemoContext,
    result: ExampleResult,
    calls: CallContext | None,
    *,
    timed_out: bool,
    model_ms: float | None,
) -> None:
    """Keep `result` (a run of `ctx` just made, whose calls `calls` counted) in the call cache
    when it may answer a rerun (the rule is in the module docstring); else do nothing."""
    if (
        calls is None
        or not (calls.answered or calls.raced)
        or timed_out
        or ctx.capture_traces
        or calls.unanswered
        or calls.unrepeatable
        or calls.answered_requests + calls.raced_requests != result.requests
        or result.bundle.status == "error"
        or (model_ms is None and ctx.latency_source != "model")
    ):
        return
    b = result.bundle
    figures = [
        b.accuracy,
        b.cost_usd,
        b.latency_ms,
        b.status,
        b.error,
        b.input_tokens,
        b.output_tokens,
        result.requests,
        result.blank,
        result.output_summary,
        calls.answered + calls.raced,
    ]
    # (NaN and infinities are written as JSON's NaN / Infinity, which `json.loads` reads back;
    # ASCII escapes keep the text a 1-byte-per-character string: one non-ASCII character, e.g.
    # a summary's ellipsis, makes CPython store all of it at 2 bytes a character, and a default
    # search keeps 28,480 memo entries in memory: 8 MiB of its peak RSS, 325 -> 317 MiB in one
    # process, measured 2026-12-07)
    text = json.dumps(figures, separators=(",", ":"), ensure_ascii=True)
    calls.cache.put(memo_key(ctx, result.example_id, result.trial), CallRecord(text, (), None))


def lookup(ctx: MemoContext, example_id: str, trial: int) -> ExampleResult | None:
    """The result a run of `example_id`, trial `trial` in `ctx` gives, from the memo (and the
    call cache's `hits` advanced by its calls), or None when the memo has none for it."""
    cache = ctx.call_cache
    if cache is None or ctx.capture_traces:
        return None
    hit = cache.get(memo_key(ctx, example_id, trial))
    if hit is None:
        return None
    try:
        figures: list[Any] = json.loads(hit.output_json)
        (accuracy, cost, latency, status, error, tin, tout, requests, blank, summary, calls) = (
            figures
        )
        bundle = MetricBundle(
            accuracy=float(accuracy),
            cost_usd=float(cost),
            latency_ms=float(latency),
            status=status,
            error=error,
            input_tokens=int(tin),
            output_tokens=int(tout),
        )
        result = ExampleResult(
            spec_hash=ctx.spec_hash,
            example_id=example_id,
            trial=trial,
            split=ctx.split,
            bundle=bundle,
            requests=int(requests),
            blank=bool(blank),
            output_summary=str(summary),
            n_agents=ctx.n_agents,
            depth=ctx.depth,
        )
    except (ValueError, TypeError):  # a damaged entry: run the example instead
        return None
    cache.count(hits=int(calls))
    return result
