"""`RayExecutor`: an evaluation's runs on Ray worker actors; the driver owns every write.

How:

- **Workers** are Ray actors (`_EvaluationWorker`, 1 CPU each). Each loads the problem by the
  path the researcher gave (`core.problems.load_problem`, trusted code as on the driver; on a
  real cluster the same path must hold the problem on every node) and evaluates batches of
  runs (`core.evaluation.executor.RemoteBatch`, JSON: the spec's JSON, example keys, trials)
  with `core.evaluation.worker.run_batch`, answering JSON (`BatchOutcome`). Nothing crosses
  as a pickled object of the spec; workers write nothing.
- **Faults** are Ray's own retries, configured: workers are created with `max_restarts` and
  `max_task_retries`, so a worker process killed mid-batch is restarted (on any node with a
  free CPU) and its unfinished batch runs again there. The evaluator records each (candidate,
  split, example, trial) once (`TopologyEvaluator.evaluate`), so a retried run is never
  recorded twice. The driver killed: `search --resume` continues from the journal, as before.
- **The call cache across workers goes through one cache actor** (`_CallCacheActor`), not
  through the driver: the driver is busy journalling and awaiting batches, and a worker's
  lookup happens in the middle of a run, so it needs an answer without a round trip through
  the driver's event loop. The actor is seeded with the driver's call cache when a run starts;
  a worker asks it on every key it has not seen (and memoises hits), and tells it every call
  it made, so no worker repeats a call another worker finished in the run. The records also
  come back to the driver with each batch, which puts them into its own call cache (the file
  it flushes): the driver remains the only writer.
- **The rate budget** is one actor (`_RateBudgetActor`) holding `TokenBuckets`; every worker
  draws from it through `_ActorRateBudget` at each model call (`core.agents.rate_budget`).
  Limits are per provider: requests per minute, tokens (input + output) per minute, calls in
  flight. By default each executor creates its own actor; several executors (the searches of
  one sweep, each in its own process) share one when they name the same actor, created once
  by `create_budget_actor` in `BUDGET_NAMESPACE` and passed as `budget_actor=NAME`: they
  then draw from one set of buckets, and the executor that did not create it never kills it.
- **Results** are handed to the evaluator by result slot, so the `CandidateEvaluation` (and
  the archive and front built from it) is the same as with `LocalExecutor`.
"""

# pyright: reportUnknownMemberType=false, reportUnknownVariableType=false, reportUnknownArgumentType=false, reportMissingTypeStubs=false, reportAttributeAccessIssue=false

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

try:
    import ray
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("RayExecutor needs Ray: pip install 'topology-studio[ray]'") from exc

from core.agents.call_cache import CallCache, CallCacheStats, CallRecord, InMemoryCallCache
from core.agents.rate_budget import ProviderLimit, TokenBuckets
from core.distributed.address import probe_ray_address
from core.errors import EvaluationError
from core.evaluation.executor import (
    BatchOutcome,
    Done,
    RemoteBatch,
    WorkerHealth,
    split_items,
)
from core.evaluation.worker import run_batch

__all__ = [
    "BUDGET_NAMESPACE",
    "RayExecutor",
    "budget_actor_report",
    "cluster_address",
    "create_budget_actor",
    "init_ray",
]

SEED_CHUNK = 2000
"""Call records sent to the cache actor per message when it is seeded."""

PING_TIMEOUT_S = 2.0
"""Seconds `health()` waits for the workers' answers before calling one unreachable."""

BUDGET_NAMESPACE = "topology-studio"
"""The Ray namespace of the named, shared budget actors (`create_budget_actor`)."""


class _CallCacheActor:
    """The run's shared call records: key -> `CallRecord.to_json()`."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self._data.get(key)

    def put_many(self, items: list[tuple[str, str]]) -> int:
        self._data.update(items)
        return len(self._data)


class _RateBudgetActor:
    """One `TokenBuckets` for the whole cluster (limits as JSON: provider -> ProviderLimit)."""

    def __init__(self, limits_json: str) -> None:
        limits = {k: ProviderLimit.model_validate(v) for k, v in json.loads(limits_json).items()}
        self._buckets = TokenBuckets(limits, keep_grant_times=True)

    def try_acquire(self, provider: str) -> float:
        return self._buckets.try_acquire(provider, time.monotonic())

    def release(self, provider: str, tokens: int) -> None:
        self._buckets.release(provider, tokens, time.monotonic())

    def report(self) -> str:
        """JSON: `granted`, `in_flight` and `grant_times` per provider."""
        b = self._buckets
        return json.dumps(
            {"granted": b.granted(), "in_flight": b.in_flight(), "grant_times": b.grant_times()}
        )


def init_ray(address: str | None, init_kwargs: Mapping[str, Any] | None = None) -> bool:
    """Connect to the Ray cluster at `address`, or with None start a private local instance
    without a dashboard (asked for 127.0.0.1; Ray 2.60 listens on every interface anyway and
    relies on its token authentication, on by default: README, "Beyond one machine"); nothing
    when Ray is already initialised here.

    Returns:
        True when this call started or connected Ray (its caller then shuts it down).

    Raises:
        EvaluationError: nothing answers at `address` (`probe_ray_address`, a few seconds:
            Ray alone waits minutes on a dead address), or Ray refuses to start or connect.
    """
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"log_to_driver": False, **(init_kwargs or {})}
    if address is None:
        kwargs = {
            "address": "local",
            "include_dashboard": False,
            "_node_ip_address": "127.0.0.1",
            "object_store_memory": 80 * 1024 * 1024,
            **kwargs,
        }
    else:
        probe_ray_address(address)
        kwargs["address"] = address
    try:
        ray.init(**kwargs)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise EvaluationError(
            f"cannot connect to Ray at {address or 'a new local instance'!r}: {exc}"
        ) from exc
    return True


def cluster_address() -> str:
    """The address other processes connect to this process's Ray cluster with (its GCS,
    `HOST:PORT`), for their `--ray-address`."""
    return str(ray.get_runtime_context().gcs_address)


def create_budget_actor(name: str, limits: Mapping[str, ProviderLimit]) -> Any:
    """Create the budget actor `name` in `BUDGET_NAMESPACE`, one `TokenBuckets` over `limits`
    (provider -> `ProviderLimit`: requests and tokens per minute, calls in flight) that every
    `RayExecutor(budget_actor=name)` on this cluster draws from.

    The actor lives as long as the process that created it (Ray's owner rule) or until it is
    killed (`ray.kill(handle)`): keep the handle for the sweep's life.

    Raises:
        ValueError: an actor of that name exists already in the namespace.
    """
    body = json.dumps({k: v.model_dump() for k, v in limits.items()})
    helper = ray.remote(num_cpus=0)(_RateBudgetActor)
    return helper.options(name=name, namespace=BUDGET_NAMESPACE).remote(body)


def budget_actor_report(actor: Any) -> dict[str, Any]:
    """A budget actor's counters: `granted`, `in_flight` and `grant_times` (monotonic seconds
    of the actor's node) per provider."""
    return json.loads(ray.get(actor.report.remote()))


class _ActorCallCache:
    """A worker's `CallCache`: its own memo, then the cache actor (a blocking lookup: the
    worker runs its batch's event loop in the actor's thread, not Ray's)."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor
        self._memo: dict[str, CallRecord] = {}

    def get(self, key: str) -> CallRecord | None:
        hit = self._memo.get(key)
        if hit is None:
            text = cast(str | None, ray.get(self._actor.get.remote(key)))
            if text is not None:
                hit = self._memo[key] = CallRecord.from_json(text)
        return hit

    def put(self, key: str, record: CallRecord) -> None:
        self._memo[key] = record
        self._actor.put_many.remote([(key, record.to_json())])

    def count(self, *, hits: int = 0, misses: int = 0, uncacheable: int = 0) -> None:
        """Counted by `run_batch`'s wrapper and sent to the driver."""

    def stats(self) -> CallCacheStats:
        return CallCacheStats()

    def flush(self) -> None:
        """A worker writes nothing."""


class _ActorRateBudget:
    """A worker's client of the budget actor (`RateBudgetLike`)."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    async def acquire(self, provider: str) -> None:
        while True:
            wait = await self._actor.try_acquire.remote(provider)
            if wait <= 0.0:
                return
            await asyncio.sleep(wait)

    async def release(self, provider: str, tokens: int) -> None:
        await self._actor.release.remote(provider, tokens)


class _EvaluationWorker:
    """One worker: the problem loaded by path, batches evaluated on request."""

    def __init__(
        self, problem_path: str, overrides_json: str, cache_actor: Any, budget_actor: Any
    ) -> None:
        from core.evaluation._run import example_key
        from core.problems import load_problem

        problem = load_problem(problem_path, overrides=json.loads(overrides_json))
        self._base = problem.evaluator(workers=1)
        self._examples = {example_key(e): e for v in problem.splits.values() for e in v}
        self._evaluators: dict[str, Any] = {}
        self._cache = None if cache_actor is None else _ActorCallCache(cache_actor)
        self._budget = None if budget_actor is None else _ActorRateBudget(budget_actor)
        self._where = f"{os.getpid()}@{ray.util.get_node_ip_address()}"

    def ping(self) -> str:
        return self._where

    def run(self, batch_json: str, use_cache: bool) -> str:
        batch = RemoteBatch.model_validate_json(batch_json)
        key = json.dumps(batch.config, sort_keys=True)
        evaluator = self._evaluators.get(key)
        if evaluator is None:
            evaluator = self._evaluators[key] = self._base.with_options(**batch.config)
        outcome = asyncio.run(
            run_batch(
                evaluator,
                batch,
                self._examples,
                call_cache=self._cache if use_cache else None,
                rate_budget=self._budget,
                worker=self._where,
            )
        )
        return outcome.model_dump_json()


class RayExecutor:
    """Runs evaluations on Ray worker actors (see the module docstring).

    Args:
        problem: the problem's TOML path or directory (what the researcher named), or a loaded
            `Problem` (its `toml_path` and `overrides` are used).
        overrides: dotted TOML overrides the workers load the problem with (default: the
            `Problem`'s own, else none).
        address: the Ray cluster (`"auto"`, `"HOST:6379"`, `"ray://HOST:10001"`); None: use
            the Ray instance this process already started, else start a private local one
            without a dashboard (`init_ray`).
        num_workers: worker actors (None: the cluster's CPUs).
        rate_limits: provider -> `ProviderLimit` (requests and tokens per minute, calls in
            flight), one budget for every worker (None: none). With `budget_actor`, the limits
            that actor was created with (recorded on the run; the actor's are what hold).
        budget_actor: the name of a budget actor made by `create_budget_actor` on the same
            cluster, drawn from instead of a budget of this executor's own (the searches of
            one sweep share one); None: this executor creates its own when `rate_limits` are
            given.
        max_restarts: Ray restarts of a dead worker.
        max_task_retries: Ray retries of a batch whose worker died.
        batches_per_worker: an evaluation is cut into about this many batches per worker.
        init_kwargs: more `ray.init` arguments (e.g. `runtime_env`).

    Attributes:
        startup_s: seconds `ray.init` and the workers' first answer took (None before).
    """

    def __init__(
        self,
        problem: Any,
        *,
        overrides: Mapping[str, Any] | None = None,
        address: str | None = None,
        num_workers: int | None = None,
        rate_limits: Mapping[str, ProviderLimit] | None = None,
        budget_actor: str | None = None,
        max_restarts: int = 3,
        max_task_retries: int = 3,
        batches_per_worker: int = 4,
        init_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(problem, str | Path):
            self._problem_path = str(problem)
            self._overrides = dict(overrides or {})
        else:
            self._problem_path = str(problem.toml_path)
            self._overrides = dict(overrides if overrides is not None else problem.overrides)
        if num_workers is not None and num_workers < 1:
            raise EvaluationError(f"num_workers must be >= 1, got {num_workers}")
        self._address = address
        self._num_workers = num_workers
        self._limits = dict(rate_limits or {})
        self._shared_budget = budget_actor
        self._max_restarts = max_restarts
        self._max_task_retries = max_task_retries
        self._per_worker = max(1, batches_per_worker)
        self._init_kwargs = dict(init_kwargs or {})
        self._started_ray = False
        self._workers: list[Any] = []
        self._stats: list[dict[str, Any]] = []
        self._cache_actor: Any = None
        self._budget_actor: Any = None
        self._seeded: int | None = None
        self.startup_s: float | None = None

    # -- start and stop ----------------------------------------------------------------------

    def start(self) -> None:
        """Connect to (or start) Ray and create the actors; idempotent (also done by the first
        evaluation).

        Raises:
            EvaluationError: a malformed address, nothing answering at it
                (`core.distributed.address.probe_ray_address`, a few seconds, where Ray alone
                would wait minutes), Ray refusing to connect, or a worker failed to load the
                problem.
        """
        if self._workers:
            return
        began = time.perf_counter()
        if init_ray(self._address, self._init_kwargs):
            self._started_ray = True
        n = self._num_workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        helper = ray.remote(num_cpus=0)
        self._cache_actor = helper(_CallCacheActor).remote()
        if self._shared_budget is not None:
            try:
                self._budget_actor = ray.get_actor(self._shared_budget, namespace=BUDGET_NAMESPACE)
            except ValueError as exc:
                self.close()
                raise EvaluationError(
                    f"no budget actor {self._shared_budget!r} on this Ray cluster: {exc}"
                ) from exc
        elif self._limits:
            limits = json.dumps({k: v.model_dump() for k, v in self._limits.items()})
            self._budget_actor = helper(_RateBudgetActor).remote(limits)
        # two threads per worker: `ping` (health) answers while a batch runs, not after it
        # (one batch at a time goes to a worker: `run` feeds each worker in turn)
        worker_cls = ray.remote(
            num_cpus=1, max_restarts=self._max_restarts, max_task_retries=self._max_task_retries
        )(_EvaluationWorker).options(max_concurrency=2)
        overrides = json.dumps(self._overrides)
        self._workers = [
            worker_cls.remote(self._problem_path, overrides, self._cache_actor, self._budget_actor)
            for _ in range(n)
        ]
        try:
            pids = ray.get([w.ping.remote() for w in self._workers])
        except Exception as exc:
            self.close()
            raise EvaluationError(f"a Ray worker could not load the problem: {exc}") from exc
        now = time.time()
        self._stats = [
            {"where": p, "batches": 0, "runs": 0, "restarts": 0, "in_flight": 0, "last_seen": now}
            for p in pids
        ]
        self.startup_s = time.perf_counter() - began

    def close(self) -> None:
        """Kill the actors; shut Ray down if this executor started it."""
        own_budget = None if self._shared_budget is not None else self._budget_actor
        for actor in [*self._workers, self._cache_actor, own_budget]:
            if actor is not None:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:  # already gone
                    pass
        self._workers, self._cache_actor, self._budget_actor = [], None, None
        self._seeded = None
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    # -- the Executor protocol ---------------------------------------------------------------

    def describe(self) -> str:
        """E.g. `"ray: 2 workers, local 127.0.0.1"` or `"ray: 8 workers at auto"`."""
        n = len(self._workers) or self._num_workers
        where = "local 127.0.0.1" if self._address is None else f"at {self._address}"
        return f"ray: {n if n is not None else 'cluster CPUs'} workers, {where}"

    def worker_pids(self) -> list[int]:
        """Each worker's current process id (asked now)."""
        return [
            int(str(p).split("@")[0]) for p in ray.get([w.ping.remote() for w in self._workers])
        ]

    def health(self) -> list[WorkerHealth]:
        """Each worker pinged now (`PING_TIMEOUT_S` at most; a worker answers while it runs a
        batch): alive, unreachable or dead, with the driver's counters (batches and runs
        finished, runs in flight, restarts) and when it last answered. Safe to call from
        another thread than the one running the evaluation (`HealthRecorder` does); `[]`
        before `start`."""
        out: list[WorkerHealth] = []
        pairs = list(zip(self._workers, self._stats, strict=False))
        refs = [w.ping.remote() for w, _ in pairs]
        ready, _ = (
            ray.wait(refs, num_returns=len(refs), timeout=PING_TIMEOUT_S) if refs else ([], [])
        )
        for i, ref in enumerate(refs):
            stats = pairs[i][1]
            state, where = "unreachable", str(stats["where"])
            if ref in ready:
                try:
                    where, state = str(ray.get(ref)), "alive"
                    stats["last_seen"] = time.time()
                except Exception:
                    state = "dead"
            pid, _, node = where.partition("@")
            out.append(
                WorkerHealth(
                    name=f"worker-{i}",
                    state=state,
                    pid=int(pid) if pid.isdigit() else None,
                    node=node or None,
                    batches=int(stats["batches"]),
                    runs=int(stats["runs"]),
                    restarts=int(stats["restarts"]),
                    in_flight=int(stats["in_flight"]),
                    last_seen=stats["last_seen"],
                )
            )
        return out

    @property
    def rate_limits(self) -> dict[str, ProviderLimit]:
        """Provider -> the limit every worker's model calls draw from (`{}`: none)."""
        return dict(self._limits)

    def budget_report(self) -> dict[str, Any]:
        """The budget actor's counters (`granted`, `in_flight`, `grant_times` per provider;
        `{}` without rate limits)."""
        if self._budget_actor is None:
            return {}
        return budget_actor_report(self._budget_actor)

    def _seed(self, call_cache: CallCache | None) -> None:
        if call_cache is None or self._seeded == id(call_cache):
            return
        if isinstance(call_cache, InMemoryCallCache):
            items = [(k, r.to_json()) for k, r in call_cache.records()]
            refs = [
                self._cache_actor.put_many.remote(items[i : i + SEED_CHUNK])
                for i in range(0, len(items), SEED_CHUNK)
            ]
            ray.get(refs)
        self._seeded = id(call_cache)

    async def run(self, batch: RemoteBatch, done: Done, call_cache: CallCache | None) -> None:
        """Run `batch`'s items on the workers (see `RemoteExecutor`).

        Raises:
            EvaluationError: a batch failed after Ray's retries (its error is the cause).
        """
        self.start()
        self._seed(call_cache)
        n = len(self._workers)
        queue = list(reversed(split_items(batch.items, n * self._per_worker)))
        use_cache = call_cache is not None

        async def feed(i: int) -> None:
            worker = self._workers[i]
            while queue:
                part = queue.pop()
                text = batch.model_copy(update={"items": part}).model_dump_json()
                stats = self._stats[i]
                stats["in_flight"] += len(part)
                try:
                    answer = await worker.run.remote(text, use_cache)
                except Exception as exc:
                    raise EvaluationError(f"a Ray batch failed after retries: {exc}") from exc
                finally:
                    stats["in_flight"] -= len(part)
                stats["last_seen"] = time.time()
                outcome = BatchOutcome.model_validate_json(answer)
                if outcome.worker != stats["where"]:
                    stats["restarts"] += 1
                    stats["where"] = outcome.worker
                stats["batches"] += 1
                stats["runs"] += len(outcome.results)
                if call_cache is not None:
                    for key, record in outcome.calls:
                        call_cache.put(key, CallRecord.from_json(record))
                    h, m, u = outcome.counts
                    call_cache.count(hits=h, misses=m, uncacheable=u)
                for index, result, cacheable in outcome.decoded():
                    done(index, result, cacheable)

        async with asyncio.TaskGroup() as group:
            for i in range(n):
                group.create_task(feed(i))
