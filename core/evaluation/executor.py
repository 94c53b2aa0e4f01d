"""Where an evaluation's runs execute: the executor plug-in of `TopologyEvaluator`.

- `LocalExecutor` (the default, and what `executor=None` means): today's in-process asyncio,
  with the forked workers of `workers=N` (`core.evaluation._fork`); nothing changes.
- A remote executor (`core.distributed.RayExecutor`) gets the runs the evaluation cache did
  not answer as `RemoteBatch`es and hands back `BatchOutcome`s; the evaluator treats every
  result exactly as one of its own (evaluation cache, cost estimator, `on_example`, the result
  slot of its (example, trial)), so the `CandidateEvaluation` is the same wherever it ran.

What travels is JSON text only, never a pickled object of the spec: a `RemoteBatch` carries the
checked spec as JSON, the evaluator's options (`EvaluatorConfig`), and each run as (result slot,
example key, trial); the worker holds the problem's examples itself (it loaded the problem by
the path the researcher gave, trusted code as on the driver) and finds each by its key. It
answers with each run's `ExampleResult.model_dump_json()` (NaN kept), the call records it made
(`CallRecord.to_json()`) and its call-cache counters. A worker writes nothing: the journal, the
run store, the evaluation cache and the call cache file are the driver's.

`run_batch(evaluator, batch, examples, call_cache)` is the worker's half, independent of Ray:
it hydrates the spec as the driver did and runs the batch's runs under the batch's concurrency.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from core.agents.call_cache import CallCache, CallCacheStats, CallRecord
from core.agents.rate_budget import ProviderLimit, RateBudgetLike, use_rate_budget
from core.errors import EvaluationError
from core.evaluation._records import ExampleResult
from core.evaluation._run import run_example
from core.evaluation.metrics import GoldExample
from core.vocab.health import WorkerHealth

if TYPE_CHECKING:
    from core.evaluation.evaluator import EvaluatorConfig, TopologyEvaluator

__all__ = [
    "BatchOutcome",
    "Executor",
    "LocalExecutor",
    "RemoteBatch",
    "RemoteExecutor",
    "WorkerHealth",
    "run_batch",
    "split_items",
]


class RemoteBatch(BaseModel):
    """One batch of one evaluation's runs, as sent to a worker (JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    spec_json: str
    """The checked spec, `TopologySpec.model_dump_json()`."""
    prompt_overrides: dict[str, str] | None = None
    """Prompt overrides applied at hydration, as on the driver."""
    spec_hash: str
    """The hash results are keyed by (`prompted_hash`)."""
    split: str
    n_agents: int
    depth: int
    config: dict[str, object]
    """The driver evaluator's `EvaluatorConfig.model_dump(mode="json")`."""
    items: tuple[tuple[int, str, int], ...] = Field(min_length=1)
    """Each run: (result slot index, example key, trial)."""


class BatchOutcome(BaseModel):
    """What a worker sends back for one `RemoteBatch` (JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    results: tuple[tuple[int, bool, str], ...]
    """Each run: (result slot index, cacheable, `ExampleResult` JSON)."""
    calls: tuple[tuple[str, str], ...] = ()
    """Call records the worker made: (call key, `CallRecord.to_json()`)."""
    counts: tuple[int, int, int] = (0, 0, 0)
    """The worker's call-cache counters for this batch: hits, misses, uncacheable."""
    worker: str = ""
    """Who ran it, e.g. `"pid 1234 on 10.0.0.5"`."""

    def decoded(self) -> list[tuple[int, ExampleResult, bool]]:
        """The results as (slot index, `ExampleResult`, cacheable).

        Raises:
            pydantic.ValidationError: a result that is not an `ExampleResult`'s JSON.
        """
        return [(i, ExampleResult.model_validate_json(t), c) for i, c, t in self.results]


Done = Callable[[int, ExampleResult, bool], None]
"""The evaluator's handler of one result: (slot index, result, cacheable)."""


@runtime_checkable
class Executor(Protocol):
    """Where runs execute.

    - `start()`: connect and create the workers now, so a bad address or a problem the
      workers cannot load is refused before a search starts (idempotent; a remote executor
      also starts on its first batch). Raises `EvaluationError`.
    - `describe()`: one line naming it, recorded on the run (`RunStarted.config["executor"]`)
      and shown in the Runs table's `executor` column, e.g. `"local"` or
      `"ray: 2 workers, local 127.0.0.1"`.
    - `health()`: each worker as seen now (`WorkerHealth`; `[]` for no remote workers). A
      search's driver snapshots it while the run goes on (`core.search.subscribers.
      HealthRecorder`), for the Runs page.
    - `close()`: release the workers.
    """

    def start(self) -> None: ...

    def describe(self) -> str: ...

    def health(self) -> list[WorkerHealth]: ...

    def close(self) -> None: ...


@runtime_checkable
class RemoteExecutor(Executor, Protocol):
    """An executor that runs batches elsewhere (the evaluator calls `run` instead of running
    the runs itself).

    `run(batch, done, call_cache)`: run every item of `batch` and call `done(index, result,
    cacheable)` exactly once per item (a retried item is reported once), on the event loop;
    put the call records the workers made into `call_cache` and add their counters to it.
    Raises what `done` raises; a lost worker's items are retried, never dropped.

    `rate_limits`: provider -> `ProviderLimit` its workers' model calls draw from (`{}`: none),
    recorded on the run (`RunStarted.config["rate_limits"]`).
    """

    @property
    def rate_limits(self) -> Mapping[str, ProviderLimit]: ...

    async def run(self, batch: RemoteBatch, done: Done, call_cache: CallCache | None) -> None: ...


class LocalExecutor:
    """Today's in-process asyncio evaluation (the default): the evaluator runs the runs itself,
    with its forked workers when `workers > 1`."""

    def start(self) -> None:
        """Nothing to start."""

    def describe(self) -> str:
        """`"local"`."""
        return "local"

    def health(self) -> list[WorkerHealth]:
        """No remote workers: `[]`."""
        return []

    def close(self) -> None:
        """Nothing to close."""


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
    from core.evaluation.evaluator import EvaluatorConfig

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


def split_items(
    items: Sequence[tuple[int, str, int]], n: int
) -> list[tuple[tuple[int, str, int], ...]]:
    """`items` dealt in turn into at most `n` non-empty batches (each a mix of examples)."""
    n = max(1, min(n, len(items)))
    return [tuple(items[i::n]) for i in range(n)]
