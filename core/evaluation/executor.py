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

The worker's half, independent of Ray, is `core.evaluation.worker.run_batch` (it needs the
evaluator, which needs this module: kept apart, so neither imports the other both ways).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from core.agents.call_cache import CallCache
from core.agents.rate_budget import ProviderLimit
from core.evaluation._records import ExampleResult
from core.hydrate import CallableRegistry
from core.ir.models import AnyNode, RouterSpec, walk
from core.vocab.health import WorkerHealth

__all__ = [
    "BatchOutcome",
    "Executor",
    "LocalExecutor",
    "RemoteBatch",
    "RemoteExecutor",
    "WorkerHealth",
    "learned_artefacts",
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
    learned: tuple[str, ...] = ()
    """The JSON of each learned condition artefact the spec routes on
    (`core.combinators.learned.LearnedCondition.to_json`): a worker's problem, loaded from
    disk, holds only what the problem registers, so the worker registers these (by digest,
    checked as read) before it hydrates the spec."""


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


def split_items(
    items: Sequence[tuple[int, str, int]], n: int
) -> list[tuple[tuple[int, str, int], ...]]:
    """`items` dealt in turn into at most `n` non-empty batches (each a mix of examples)."""
    n = max(1, min(n, len(items)))
    return [tuple(items[i::n]) for i in range(n)]


def learned_artefacts(spec: AnyNode, callables: CallableRegistry) -> tuple[str, ...]:
    """The JSON of the learned condition artefacts `spec`'s routes name (what a remote worker
    registers before hydrating; `core.combinators.learned.LearnedRoute`), in document order."""
    from core.combinators.learned import learned_condition_of

    out: list[str] = []
    for _, node in walk(spec):
        if isinstance(node, RouterSpec):
            for route in node.routes:
                name = route.condition_name
                if name is not None and name in callables:
                    cond = learned_condition_of(callables.get(name))
                    if cond is not None and cond.to_json() not in out:
                        out.append(cond.to_json())
    return tuple(out)
