"""Forked evaluation workers: the runs of one `evaluate` call shared with child processes.

Why (issue 17): a warm offline search is CPU-bound Python, one core busy and the other idle;
the runs of one candidate are independent, so `TopologyEvaluator(workers=N)` runs a share of
them in N - 1 children forked from the evaluating process, on their own event loops, while the
parent runs its own share.

How:

- **Fork, not spawn.** A child is `os.fork()`ed inside `evaluate`, so it inherits the hydrated
  topology, the examples, the score function and the call cache as they are: nothing is
  pickled on the way in and nothing is imported again. The parent calls `gc.freeze()` just
  before the fork and `gc.unfreeze()` just after (the `gc` module's own advice), so neither
  process's collector walks the shared heap and the pages stay shared copy-on-write.
- **The share.** Runs are dealt round-robin over the processes (run i to process i mod N, the
  parent first), so each gets the same mix of examples. An evaluation with fewer than
  `MIN_RUNS_PER_WORKER` runs per process (a minibatch) stays in the parent: a fork costs a few
  ms.
- **The way back.** A child sends its results on a private pipe as pickled frames (8-byte
  length, then the pickle) of at most `BATCH` runs or `FLUSH_S` seconds each, so the parent
  journals them as they come (the live dashboard's progress), then one last frame with the call
  cache's new records and counters. Pickle is safe here: both ends are this process's own code
  and the pipe is private to the pair (nothing stored and nothing from a spec is unpickled).
- **What the parent does with them** is what it does with its own runs (evaluation cache, cost
  estimator, `on_example`, the result slots, in example order), so a `CandidateEvaluation` is
  the same whichever process ran which example: every run is a pure function of its example,
  its trial and the call cache (the replay model decides races by event-loop turns inside one
  run, never across runs).
- **Failure loses nothing.** A child that dies or sends garbage is reaped and the runs it did
  not report run in the parent (a warning is logged). When the evaluation ends early (Ctrl-C,
  a stop, the wall-clock budget cancelling it, `on_example` raising) every child is killed
  (SIGKILL) and reaped in a `finally`. Children ignore SIGINT: a Ctrl-C reaches the whole
  process group, and it is the parent's to handle. A child whose parent was killed dies of
  SIGPIPE at its next frame.
- **Where it works.** Only where `os.fork` exists and is safe to use this way (Linux), only
  from the main thread (a search the studio runs in one of its server's threads keeps to one
  process: forking a threaded server is not safe), and only for in-process models (the replay model, function models): a child must not share the
  parent's open network connections, so a problem with hosted models keeps `workers = 1` (the
  default everywhere but the offline problems that set `[search] workers`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import pickle
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from core.agents.call_cache import CallCache, CallCacheStats, CallRecord
from core.evaluation._records import ExampleResult
from core.evaluation._run import RunContext, RunnableTopology, run_example
from core.evaluation.metrics import GoldExample

__all__ = [
    "BATCH",
    "FLUSH_S",
    "MIN_RUNS_PER_WORKER",
    "Job",
    "Workers",
    "fork_supported",
    "resolve_workers",
    "run_sharded",
]

_log = logging.getLogger(__name__)

Workers = int | Literal["auto"]
"""Processes that run one evaluation's runs: an int >= 1, or `"auto"` (the CPUs this process
may run on, `os.sched_getaffinity`, at most `MAX_AUTO_WORKERS`)."""

MAX_AUTO_WORKERS = 8
"""The most processes `"auto"` asks for (beyond, the parent's journalling is the bottleneck)."""

MIN_RUNS_PER_WORKER = 32
"""An evaluation forks only when every process gets at least this many runs (a minibatch of 20
stays in the parent)."""

BATCH = 64
"""A child sends its results in frames of at most this many runs ..."""

FLUSH_S = 0.25
"""... or after this many seconds since its last frame, whichever comes first."""

Job = tuple[int, GoldExample, str, int]
"""One run to make: (result slot index, example, example key, trial)."""

_HEADER = struct.Struct("<Q")


def fork_supported() -> bool:
    """Whether this platform forks evaluation workers (Linux only: macOS's system libraries are
    not fork-safe, Windows has no fork)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def resolve_workers(workers: Workers) -> int:
    """The number of processes `workers` asks for here (1 where forking is unsupported).

    Raises:
        ValueError: `workers` is not an int >= 1 or `"auto"`.
    """
    if workers == "auto":
        n = min(MAX_AUTO_WORKERS, len(os.sched_getaffinity(0)))
    elif type(workers) is int and workers >= 1:  # (not a bool, not a str from a TOML file)
        n = workers
    else:
        raise ValueError(f"workers must be an int >= 1 or 'auto', not {workers!r}")
    return n if fork_supported() else 1


def deal(jobs: Sequence[Job], n: int) -> list[list[Job]]:
    """`jobs` dealt round-robin into `n` shares (the parent's first), or one share when any
    share would have fewer than `MIN_RUNS_PER_WORKER` runs."""
    while n > 1 and len(jobs) < n * MIN_RUNS_PER_WORKER:
        n -= 1
    return [list(jobs[i::n]) for i in range(n)]


class _ChildCallCache:
    """The call cache inside a child: reads the inherited cache, keeps what the child puts and
    counts, to send back to the parent at the end."""

    def __init__(self, inner: CallCache) -> None:
        self._inner = inner
        self._local: dict[str, CallRecord] = {}
        self.new: list[tuple[str, CallRecord]] = []
        self.hits = self.misses = self.uncacheable = 0

    def get(self, key: str) -> CallRecord | None:
        found = self._local.get(key)
        return found if found is not None else self._inner.get(key)

    def put(self, key: str, record: CallRecord) -> None:
        self._local[key] = record
        self.new.append((key, record))

    def count(self, *, hits: int = 0, misses: int = 0, uncacheable: int = 0) -> None:
        self.hits += hits
        self.misses += misses
        self.uncacheable += uncacheable

    def stats(self) -> CallCacheStats:
        return CallCacheStats(self.hits, self.misses, self.uncacheable)

    def flush(self) -> None:
        """Nothing: the parent flushes what the child sends back."""


def _write_frame(fd: int, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _child(
    fd: int, jobs: list[Job], topology: RunnableTopology, ctx: RunContext, concurrency: int
) -> None:
    """The child's whole life: run `jobs`, send them, exit (never returns)."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        calls = None if ctx.call_cache is None else _ChildCallCache(ctx.call_cache)
        child_ctx = ctx if calls is None else replace(ctx, call_cache=calls)
        asyncio.run(_child_runs(fd, jobs, topology, child_ctx, concurrency))
        counts = (0, 0, 0) if calls is None else (calls.hits, calls.misses, calls.uncacheable)
        _write_frame(fd, ("done", [] if calls is None else calls.new, counts))
    except BaseException as exc:  # noqa: BLE001 (reported to the parent, which runs the rest)
        code = 1
        try:
            _write_frame(fd, ("failed", f"{type(exc).__name__}: {exc}"))
        except BaseException:  # noqa: BLE001 (the pipe is gone: the parent is)
            pass
    finally:
        os._exit(code)


async def _child_runs(
    fd: int, jobs: list[Job], topology: RunnableTopology, ctx: RunContext, concurrency: int
) -> None:
    semaphore = asyncio.Semaphore(concurrency)
    ready: list[tuple[int, ExampleResult, bool]] = []
    last = time.monotonic()

    def send() -> None:
        nonlocal last
        if ready:
            _write_frame(fd, ("results", list(ready)))
            ready.clear()
        last = time.monotonic()

    async def one(job: Job) -> None:
        index, example, key, trial = job
        async with semaphore:
            result, cacheable = await run_example(topology, example, key, trial, ctx)
        ready.append((index, result, cacheable))
        if len(ready) >= BATCH or time.monotonic() - last >= FLUSH_S:
            send()

    async with asyncio.TaskGroup() as group:
        for job in jobs:
            group.create_task(one(job))
    send()


@dataclass
class _Worker:
    """The parent's handle on one child."""

    pid: int
    fd: int
    jobs: dict[int, Job]
    """Slot index -> job, for the runs not yet reported."""
    reaped: bool = False
    buffer: bytearray = field(default_factory=bytearray)

    def close(self) -> None:
        """Kill the child if it still runs, reap it, close the pipe (idempotent)."""
        if self.reaped:
            return
        self.reaped = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass


def _fork(
    jobs: list[Job], topology: RunnableTopology, ctx: RunContext, concurrency: int
) -> _Worker | None:
    """Fork one child for `jobs`; None when the fork failed (the parent then runs them)."""
    read_fd, write_fd = os.pipe()
    gc.freeze()
    try:
        pid = os.fork()
    except OSError as exc:
        gc.unfreeze()
        os.close(read_fd)
        os.close(write_fd)
        _log.warning("evaluation worker: fork failed (%s); running its share here", exc)
        return None
    if pid == 0:  # the child
        os.close(read_fd)
        _child(write_fd, jobs, topology, ctx, concurrency)
    gc.unfreeze()
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    return _Worker(pid, read_fd, {job[0]: job for job in jobs})


async def _collect(
    worker: _Worker,
    done: Callable[[int, ExampleResult, bool], None],
    call_cache: CallCache | None,
    run_here: Callable[[Job], Coroutine[Any, Any, None]],
) -> None:
    """Hand each run the child reports to `done`; when the child ends without reporting them
    all, run the rest through `run_here`."""
    loop = asyncio.get_running_loop()
    messages: asyncio.Queue[Any] = asyncio.Queue()
    finished = False

    def readable() -> None:
        try:
            chunk = os.read(worker.fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError as exc:
            chunk = b""
            _log.warning("evaluation worker %d: pipe error %s", worker.pid, exc)
        if not chunk:
            loop.remove_reader(worker.fd)
            messages.put_nowait(None)
            return
        buf = worker.buffer
        buf += chunk
        while len(buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buf)
            if len(buf) < _HEADER.size + size:
                break
            payload = bytes(buf[_HEADER.size : _HEADER.size + size])
            del buf[: _HEADER.size + size]
            try:
                messages.put_nowait(pickle.loads(payload))  # noqa: S301 (our own child, see above)
            except Exception as exc:  # noqa: BLE001 (a damaged frame: run the rest here)
                messages.put_nowait(("failed", f"unreadable frame ({type(exc).__name__})"))

    loop.add_reader(worker.fd, readable)
    try:
        while True:
            message = await messages.get()
            if message is None:
                break
            kind = message[0]
            if kind == "results":
                for index, result, cacheable in message[1]:
                    if worker.jobs.pop(index, None) is not None:
                        done(index, result, cacheable)
            elif kind == "done":
                new, (hits, misses, uncacheable) = message[1], message[2]
                if call_cache is not None:
                    for key, record in new:
                        call_cache.put(key, record)
                    call_cache.count(hits=hits, misses=misses, uncacheable=uncacheable)
                finished = True
            else:
                _log.warning("evaluation worker %d failed: %s", worker.pid, message[1])
                break
    finally:
        if not worker.reaped:
            loop.remove_reader(worker.fd)
        worker.close()
    if not finished or worker.jobs:
        rest = list(worker.jobs.values())
        worker.jobs.clear()
        if rest:
            _log.warning(
                "evaluation worker %d ended with %d run(s) unreported; running them here",
                worker.pid,
                len(rest),
            )
        async with asyncio.TaskGroup() as group:
            for job in rest:
                group.create_task(run_here(job))


async def run_sharded(
    jobs: Sequence[Job],
    n_workers: int,
    *,
    topology: RunnableTopology,
    ctx: RunContext,
    concurrency: int,
    run_here: Callable[[Job], Coroutine[Any, Any, None]],
    done: Callable[[int, ExampleResult, bool], None],
) -> None:
    """Run `jobs`: the parent's share through `run_here` (which must hand its result to `done`
    itself), the others' in forked children (`deal`), each reported run handed to `done(slot
    index, result, cacheable)` on the parent's event loop.

    Raises:
        Whatever `run_here` or `done` raise (the children are killed first).
    """
    if threading.current_thread() is not threading.main_thread():
        n_workers = 1  # (a server's thread, e.g. the studio's searches: never fork a server)
    shares = deal(jobs, n_workers)
    workers: list[_Worker] = []
    try:
        mine = list(shares[0])
        for share in shares[1:]:
            worker = _fork(share, topology, ctx, concurrency)
            if worker is None:
                mine.extend(share)
            else:
                workers.append(worker)
        async with asyncio.TaskGroup() as group:
            for worker in workers:
                group.create_task(_collect(worker, done, ctx.call_cache, run_here))
            for job in mine:
                group.create_task(run_here(job))
    finally:
        for worker in workers:
            worker.close()
