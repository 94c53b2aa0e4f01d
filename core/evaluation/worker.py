"""The worker's half of a remote evaluation: `run_batch` runs a `RemoteBatch` here, independent
of Ray (`core.distributed.RayExecutor`'s actors call it), and answers a `BatchOutcome` (JSON).

It lives apart from `core.evaluation.executor` (the plug-in's protocols and JSON records, which
the evaluator imports) because it needs the evaluator itself: so no module of the evaluation
imports another that imports it back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from core.agents.call_cache import CallCache, CallCacheStats, CallRecord
from core.agents.rate_budget import RateBudgetLike, use_rate_budget
from core.errors import EvaluationError
from core.evaluation._run import run_example
from core.evaluation.evaluator import EvaluatorConfig, TopologyEvaluator
from core.evaluation.executor import BatchOutcome, RemoteBatch
from core.evaluation.metrics import GoldExample

__all__ = ["evaluator_config", "run_batch"]


class _CountingCache:
    """A worker's view of a call cache: every call goes to `inner`; the records put and the
    counters of this batch are kept to send back to the driver."""

    def __init__(self, inner: CallCache) -> None:
        self._inner = inner
        self.new: list[tuple[str, CallRecord]] = []
        self.counts = [0, 0, 0]

    def get(self, key: str) -> CallRecord | None:
        return self._inner.get(key)

    def put(self, key: str, record: CallRecord) -> None:
        self._inner.put(key, record)
        self.new.append((key, record))

    def count(self, *, hits: int = 0, misses: int = 0, uncacheable: int = 0) -> None:
        self.counts[0] += hits
        self.counts[1] += misses
        self.counts[2] += uncacheable

    def stats(self) -> CallCacheStats:
        return CallCacheStats(*self.counts)

    def flush(self) -> None:
        """The driver flushes; a worker writes nothing."""


def evaluator_config(batch: RemoteBatch) -> EvaluatorConfig:
    """The batch's evaluator options as an `EvaluatorConfig`.

    Raises:
        pydantic.ValidationError: not valid options.
    """
    return EvaluatorConfig.model_validate(batch.config)


async def run_batch(
    evaluator: TopologyEvaluator,
    batch: RemoteBatch,
    examples: Mapping[str, GoldExample],
    *,
    call_cache: CallCache | None = None,
    rate_budget: RateBudgetLike | None = None,
    worker: str = "",
) -> BatchOutcome:
    """Run `batch` here (a worker's half of a remote evaluation).

    Args:
        evaluator: built from the same problem as the driver's, with the batch's options
            (`evaluator.with_options(**batch.config)`).
        batch: the runs.
        examples: example key -> example (every split of the problem).
        call_cache: the worker's view of the run's call cache (None: off).
        rate_budget: the budget every model call draws from (None: unlimited).
        worker: recorded on the outcome.

    Raises:
        EvaluationError: an example key the worker does not hold, or a spec it cannot hydrate
            (the driver checked it: a different problem on the worker).
    """
    missing = sorted({key for _, key, _ in batch.items if key not in examples})
    if missing:
        raise EvaluationError(
            f"the worker's problem has no examples {missing[:5]}: is it the driver's problem?"
        )
    if batch.learned:
        from core.combinators.learned import LearnedCondition, register_learned

        for text in batch.learned:
            register_learned(LearnedCondition.from_json(text), evaluator.callable_registry)
    checked, topology = evaluator._check(batch.spec_json, batch.prompt_overrides)  # pyright: ignore[reportPrivateUsage]
    if topology is None:
        raise EvaluationError(f"the worker could not hydrate the candidate: {checked.reason}")
    counting = None if call_cache is None else _CountingCache(call_cache)
    ctx = evaluator._run_context(  # pyright: ignore[reportPrivateUsage]
        batch.spec_hash, batch.split, batch.n_agents, batch.depth, counting
    )
    semaphore = asyncio.Semaphore(evaluator.config.concurrency)
    out: dict[int, tuple[bool, str]] = {}

    async def one(index: int, key: str, trial: int) -> None:
        async with semaphore:
            result, cacheable = await run_example(topology, examples[key], key, trial, ctx)
        out[index] = (cacheable, result.model_dump_json())

    with use_rate_budget(rate_budget):
        async with asyncio.TaskGroup() as group:
            for index, key, trial in batch.items:
                group.create_task(one(index, key, trial))
    results = tuple((i, c, t) for i, (c, t) in sorted(out.items()))
    if counting is None:
        return BatchOutcome(results=results, worker=worker)
    h, m, u = counting.counts
    return BatchOutcome(
        results=results,
        calls=tuple((k, r.to_json()) for k, r in counting.new),
        counts=(h, m, u),
        worker=worker,
    )
