"""Forked evaluation workers: the runs of one `evaluate` call shared with worker processes.

Why: a warm offline search is CPU-bound Python, one core busy and the other idle;
the runs of one candidate are independent, so `TopologyEvaluator(workers=N)` runs a share of
each big enough evaluation in N - 1 worker processes, on their own event loops, while the
parent runs its own share.

How:

- **Forked, and kept.** A worker is `os.fork()`ed from the evaluating process on the first
  evaluation it is needed for, so it inherits the evaluator (registries, score function, the
  problem's data, the call cache) as they are: nothing is imported again. It then serves one
  evaluation after another (`WorkerPool`): for each, the parent sends the checked spec's JSON
  and the worker's share of the runs, each example by its number in the pool's table of the
  examples it has seen (`WorkerPool._tag`): the worker inherited that table at its fork, so an
  example arrives whole, its input's own type kept (JSON would turn a state model into a dict).
  An evaluation with an example numbered after a worker's fork (the held-out test's, say)
  forks a fresh worker first. The worker hydrates the spec as
  the parent did. (A fork per evaluation was tried first: every page either process wrote
  after a fork took a copy-on-write fault, 632,000 minor faults and 2.3 s of system time in a
  warm default search, against 155,000 and 1.0 s with one worker for the run.) Pages written
  after the fork stop being shared, so a worker holding more than `RECYCLE_PRIVATE_MIB` of
  private memory after an evaluation is replaced by a fresh fork for the next one: the memory
  of the two processes stays bounded. The search run closes its workers when it ends
  (`TopologyEvaluator.close_workers`), before the run is stored.
- **The collector.** The parent calls `gc.freeze()` just before a fork and leaves the heap it
  had then frozen (the `gc` module's advice: a collection walking the shared heap writes every
  object's header, and after an unfreeze the parent's next full collection turned 30-50 MiB
  of shared pages private to the worker at a time). The cost: a reference cycle that was
  already garbage at a fork is never collected (everything else is freed by reference
  counting as before).
- **The share.** Runs are dealt in turn over the processes (`deal`), so each gets the same
  mix of examples, the parent `PARENT_WEIGHT` of a worker's share: it also journals every
  result, its workers' included. An evaluation with fewer than 2 x `MIN_RUNS_PER_WORKER` runs
  (a minibatch) stays in the parent. (One queue that topped each worker up as it
  reported balanced better but cost more than it saved: 10.2-10.6 s against 9.1-10.2 s for a
  warm default search, 2026-12-04.)
- **The way back.** A worker sends its results on a private pipe in frames (8-byte length,
  then the payload) of at most `BATCH` runs or `FLUSH_S` seconds each, so the parent journals
  them as they come (the live dashboard's progress), then a `done` frame with the call cache's
  new records and counters. Everything on the pipes is JSON (a result as
  `ExampleResult.model_dump_json`, read back with `model_validate_json`, NaN kept); nothing is
  unpickled or executed (tests/ir/test_ir_no_dynamic_code.py).
- **What the parent does with them** is what it does with its own runs (evaluation cache, cost
  estimator, `on_example`, the result slots, in example order), so a `CandidateEvaluation` is
  the same whichever process ran which example: every run is a pure function of its example,
  its trial and the call cache (the replay model decides races by event-loop turns inside one
  run, never across runs). A worker reads the call cache it was forked with plus what it made
  itself, so in a cold run it may make a call the parent has just stored: the same answer and
  charge (recorded usage either way), one more model call.
- **Failure loses nothing.** A worker that dies, sends garbage, or sends nothing for
  `SILENCE_S` (its event loop sends a heartbeat every `HEARTBEAT_S`: a stopped or deadlocked
  worker sends none) is killed and reaped, and the runs it did not report run in the parent (a
  warning is logged). When an evaluation ends early (Ctrl-C, a
  stop, the wall-clock budget cancelling it, `on_example` raising) every worker is killed
  (SIGKILL) and reaped in a `finally`, and fresh ones are forked when next needed. Workers
  ignore SIGINT: a Ctrl-C reaches the whole process group, and it is the parent's to handle.
  A worker sees the end of its command pipe when its parent is gone, and exits.
- **Where it works.** Only where `os.fork` exists and is safe to use this way (Linux), only
  from the main thread (a search the studio runs in one of its server's threads keeps to one
  process: forking a threaded server is not safe), and only for in-process models (the replay
  model, function models): a worker must not share the parent's open network connections, so
  a problem with hosted models keeps `workers = 1` (the default everywhere but the offline
  problems that set `[search] workers`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.agents.call_cache import CallCache, CallCacheStats, CallRecord
from core.evaluation._records import ExampleResult
from core.evaluation._run import RunContext, RunnableTopology, run_example
from core.evaluation.metrics import GoldExample

__all__ = [
    "BATCH",
    "FLUSH_S",
    "HEARTBEAT_S",
    "SILENCE_S",
    "MIN_RUNS_PER_WORKER",
    "Job",
    "Workers",
    "Command",
    "Prepared",
    "RECYCLE_PRIVATE_MIB",
    "WorkerPool",
    "fork_supported",
    "resolve_workers",
]

_log = logging.getLogger(__name__)

Workers = int | Literal["auto"]
"""Processes that run one evaluation's runs: an int >= 1, or `"auto"` (the CPUs this process
may run on, `os.sched_getaffinity`, at most `MAX_AUTO_WORKERS`)."""

MAX_AUTO_WORKERS = 8
"""The most processes `"auto"` asks for (beyond, the parent's journalling is the bottleneck)."""

MIN_RUNS_PER_WORKER = 32
"""An evaluation uses N processes only with at least N times this many runs (a minibatch of 20
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


PARENT_WEIGHT = 0.85
"""The parent's share of an evaluation's runs, as a fraction of one worker's. With even shares
in a warm default search the parent ended its share 0.55 s later than the worker in all
(5.14 s against 4.60 s, summed over the 68 evaluations): it also journals the worker's
results."""


def deal(jobs: Sequence[Job], n: int) -> list[list[Job]]:
    """`jobs` dealt into `n` shares, the parent's first: each run in turn to the share furthest
    below its part (weights `PARENT_WEIGHT` for the parent, 1 for each worker; the earlier
    share on a tie), so each share keeps the order of `jobs` and the mix of its examples.
    Fewer shares when there are fewer than `n` x `MIN_RUNS_PER_WORKER` runs.

    Example: of 80 runs on 2 processes the parent takes 37 (runs 1, 3, 5, 7, 9, 11, 14, ...),
    the worker 43 (0, 2, 4, 6, 8, 10, 12, 13, ...).
    """
    while n > 1 and len(jobs) < n * MIN_RUNS_PER_WORKER:
        n -= 1
    if n == 1:
        return [list(jobs)]
    weights = [PARENT_WEIGHT] + [1.0] * (n - 1)
    total = sum(weights)
    shares: list[list[Job]] = [[] for _ in range(n)]
    for k, job in enumerate(jobs, start=1):
        behind = [k * w / total - len(share) for w, share in zip(weights, shares, strict=True)]
        shares[behind.index(max(behind))].append(job)
    return shares


Command = tuple[str, dict[str, str] | None, str, str, int, int]
"""What a worker needs to run one evaluation's runs: (the checked spec as JSON, the prompt
overrides, the results' spec hash, split, n_agents, depth)."""

Prepared = tuple[RunnableTopology, RunContext]
"""The hydrated topology and the run context of one evaluation, as a worker builds them."""

Prepare = Callable[[Command, CallCache | None], Prepared]
"""`prepare(command, call_cache)`, called in the worker (the evaluator's own method)."""


class _WorkerCallCache:
    """The call cache inside a worker: reads the cache it was forked with, keeps what it puts
    and counts, and hands both to the parent after each evaluation (`take`)."""

    def __init__(self, inner: CallCache) -> None:
        self._inner = inner
        self._local: dict[str, CallRecord] = {}
        self._new: list[tuple[str, CallRecord]] = []
        self._counts = [0, 0, 0]

    def get(self, key: str) -> CallRecord | None:
        found = self._local.get(key)
        return found if found is not None else self._inner.get(key)

    def put(self, key: str, record: CallRecord) -> None:
        self._local[key] = record
        self._new.append((key, record))

    def count(self, *, hits: int = 0, misses: int = 0, uncacheable: int = 0) -> None:
        self._counts[0] += hits
        self._counts[1] += misses
        self._counts[2] += uncacheable

    def stats(self) -> CallCacheStats:
        return CallCacheStats(*self._counts)

    def flush(self) -> None:
        """Nothing: the parent flushes what the worker sends back."""

    def take(self) -> tuple[list[tuple[str, CallRecord]], tuple[int, int, int]]:
        """The records put and the counts since the last `take`."""
        new, counts = self._new, (self._counts[0], self._counts[1], self._counts[2])
        self._new, self._counts = [], [0, 0, 0]
        return new, counts


def _frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload)) + payload


def _json_frame(message: Any) -> bytes:
    """A frame holding `message` as JSON (tag `J`)."""
    return _frame(b"J" + json.dumps(message, separators=(",", ":")).encode())


def _results_frame(ready: Sequence[tuple[int, ExampleResult, bool]]) -> bytes:
    """A frame of results (tag `R`): one line per run, `index<TAB>cacheable<TAB>result JSON`."""
    lines = [
        f"{index}\t{int(cacheable)}\t".encode() + result.model_dump_json().encode()
        for index, result, cacheable in ready
    ]
    return _frame(b"R" + b"\n".join(lines))


def _decode(payload: bytes) -> Any:
    """A frame's message: `["results", [(index, ExampleResult, cacheable), ...]]` for an `R`
    frame, the JSON value of a `J` frame.

    Raises:
        ValueError: not a frame this module writes.
    """
    tag, body = payload[:1], payload[1:]
    if tag == b"J":
        return json.loads(body)
    if tag != b"R":
        raise ValueError(f"unknown frame tag {tag!r}")
    out: list[tuple[int, ExampleResult, bool]] = []
    for line in body.split(b"\n"):
        index, cacheable, text = line.split(b"\t", 2)
        out.append((int(index), ExampleResult.model_validate_json(text), cacheable == b"1"))
    return ["results", out]


def _write_frame(fd: int, frame: bytes) -> None:
    view = memoryview(frame)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, n: int) -> bytes | None:
    parts: list[bytes] = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def _read_frame(fd: int) -> Any:
    """The next frame on a blocking pipe, None at its end."""
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    data = _read_exactly(fd, _HEADER.unpack(header)[0])
    return None if data is None else _decode(data)


_PARENT_FDS: set[int] = set()
"""Every pipe end a parent holds to its workers (of every pool): a new worker closes its
copies, so a worker sees the end of its command pipe when its own parent goes, not when the
last of its siblings does."""


def _serve(
    cmd_fd: int,
    res_fd: int,
    prepare: Prepare,
    call_cache: CallCache | None,
    concurrency: int,
    examples: list[GoldExample],
) -> None:
    """A worker's whole life: read commands, run each one's share, report; exit at the end of
    the command pipe (its parent closed it or died). Never returns."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for fd in _PARENT_FDS:
            try:
                os.close(fd)
            except OSError:
                pass
        _PARENT_FDS.clear()
        calls = None if call_cache is None else _WorkerCallCache(call_cache)
        while (message := _read_frame(cmd_fd)) is not None:
            command, sent = message
            jobs: list[Job] = [
                (index, examples[tag], key, trial) for index, key, trial, tag in sent
            ]
            topology, ctx = prepare(tuple(command), calls)  # pyright: ignore[reportArgumentType]
            asyncio.run(_worker_runs(res_fd, jobs, topology, ctx, concurrency))
            new, counts = ([], (0, 0, 0)) if calls is None else calls.take()
            records = [[key, record.to_json()] for key, record in new]
            _write_frame(res_fd, _json_frame(["done", records, list(counts)]))
    except BaseException as exc:  # noqa: BLE001 (reported to the parent, which runs the rest)
        code = 1
        try:
            _write_frame(res_fd, _json_frame(["failed", f"{type(exc).__name__}: {exc}"]))
        except BaseException:  # noqa: BLE001 (the pipe is gone: the parent is)
            pass
    finally:
        os._exit(code)


async def _worker_runs(
    fd: int, jobs: list[Job], topology: RunnableTopology, ctx: RunContext, concurrency: int
) -> None:
    semaphore = asyncio.Semaphore(concurrency)
    ready: list[tuple[int, ExampleResult, bool]] = []
    last = time.monotonic()

    def send() -> None:
        nonlocal last
        if ready:
            _write_frame(fd, _results_frame(ready))
            ready.clear()
        last = time.monotonic()

    async def one(job: Job) -> None:
        index, example, key, trial = job
        async with semaphore:
            result, cacheable = await run_example(topology, example, key, trial, ctx)
        ready.append((index, result, cacheable))
        if len(ready) >= BATCH or time.monotonic() - last >= FLUSH_S:
            send()

    loop = asyncio.get_running_loop()
    beats: list[asyncio.TimerHandle] = []

    def beat() -> None:  # (from the event loop: a worker whose loop is stuck sends none)
        _write_frame(fd, _json_frame(["alive"]))
        beats[0] = loop.call_later(HEARTBEAT_S, beat)

    beats.append(loop.call_later(HEARTBEAT_S, beat))
    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(one(job))
    finally:
        beats[0].cancel()
    send()


HEARTBEAT_S = 1.0
"""A worker's event loop sends an `("alive",)` frame this often while it runs an evaluation."""

SILENCE_S = 120.0
"""A worker that sent nothing (or read nothing of its command) for this long, in seconds,
during an evaluation is taken for stopped or deadlocked (e.g. a lock another thread of the
parent held at the fork, or `kill -STOP`): it is killed, and the runs it did not report are made
in the parent. The heartbeat comes from the worker's event loop, so a step that holds the loop
longer than this (a synchronous function running 2 minutes, which stalls every other run of
its process too) is taken for one as well: its runs are made again, with the same results."""


@dataclass
class _Worker:
    """The parent's handle on one worker process."""

    pid: int
    cmd_fd: int
    res_fd: int
    known: int = 0
    """How many of the pool's examples (`WorkerPool._tag`) this worker inherited at its fork."""
    buffer: bytearray = field(default_factory=bytearray)
    closed: bool = False

    def private_mib(self) -> float:
        """The worker's memory no other process shares (Private_Clean + Private_Dirty of
        `/proc/PID/smaps_rollup`), MiB; 0.0 when it cannot be read."""
        kib = 0
        try:
            with open(f"/proc/{self.pid}/smaps_rollup", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith(("Private_Clean:", "Private_Dirty:")):
                        kib += int(line.split()[1])
        except (OSError, ValueError):
            return 0.0
        return kib / 1024

    def close(self) -> None:
        """Kill the worker if it still runs, reap it, close both pipes (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for fd in (self.cmd_fd, self.res_fd):
            _PARENT_FDS.discard(fd)
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _fork(
    prepare: Prepare,
    call_cache: CallCache | None,
    concurrency: int,
    examples: list[GoldExample],
) -> _Worker | None:
    """Fork one worker; None when the fork failed (the parent then runs its share)."""
    cmd_read, cmd_write = os.pipe()
    res_read, res_write = os.pipe()
    gc.freeze()
    try:
        pid = os.fork()
    except OSError as exc:
        for fd in (cmd_read, cmd_write, res_read, res_write):
            os.close(fd)
        _log.warning("evaluation worker: fork failed (%s); running its share here", exc)
        return None
    if pid == 0:  # the worker
        os.close(cmd_write)
        os.close(res_read)
        _serve(cmd_read, res_write, prepare, call_cache, concurrency, examples)
    os.close(cmd_read)
    os.close(res_write)
    os.set_blocking(res_read, False)
    os.set_blocking(cmd_write, False)  # (written by `_send`, never blocking the event loop)
    _PARENT_FDS.update((cmd_write, res_read))
    return _Worker(pid, cmd_write, res_read, known=len(examples))


RECYCLE_PRIVATE_MIB = 24.0
"""A worker whose private memory (MiB) passed this after an evaluation is closed, and a fresh
one forked for the next: pages the parent or the worker wrote since the fork are no longer
shared, so a worker kept forever would become a second copy of the parent's heap. In a warm
default search one worker serves the whole run, ending at 43 MiB (measured 2026-12-04). At 48
MiB, a cold default search's process tree peaked at 325 MiB of PSS (the parent and a worker
near its limit, in the held-out test), at 24 MiB at 291 MiB, with the same results and wall
time within noise (`bench/bench_search.py --default-search-only`, 2026-12-07)."""


class WorkerPool:
    """The forked workers of one evaluator, kept from one evaluation to the next.

    A worker is forked on the first evaluation that is big enough to share (`shares`), serves
    evaluations until it holds more than `RECYCLE_PRIVATE_MIB` of private memory, or fails, or
    an evaluation ends early (it is then killed: it may be in the middle of runs), and is
    replaced by a fresh fork on the next evaluation. `close()` kills and reaps them all (the
    evaluator calls it when it is collected, and when its call cache changes); a worker whose
    parent is gone sees the end of its command pipe and exits.

    Args:
        n_workers: processes per evaluation, the parent included (>= 2).
    """

    def __init__(self, n_workers: int) -> None:
        self.n_workers = n_workers
        self._workers: list[_Worker] = []
        self._busy = False
        self._examples: list[GoldExample] = []
        """Every example evaluated here, by number (kept alive, so an id stays its own)."""
        self._numbers: dict[int, int] = {}
        """id(example) -> its number in `_examples`."""

    @property
    def pids(self) -> list[int]:
        """The live workers' process ids."""
        return [w.pid for w in self._workers]

    def shares(self, jobs: Sequence[Job]) -> bool:
        """Whether `jobs` are shared at all: on the main thread (a search the studio runs in
        one of its server's threads keeps to one process: forking a threaded server is not
        safe), with at least 2 x `MIN_RUNS_PER_WORKER` runs, and while no other evaluation of
        this evaluator has the workers (two evaluations run at once, e.g. under
        `asyncio.gather`: the second runs in the parent alone)."""
        return (
            not self._busy
            and threading.current_thread() is threading.main_thread()
            and len(deal(jobs, self.n_workers)) > 1
        )

    def _tag(self, example: GoldExample) -> int:
        """The example's number in this pool's table (a new one the first time it is seen)."""
        number = self._numbers.get(id(example))
        if number is None:
            number = self._numbers[id(example)] = len(self._examples)
            self._examples.append(example)
        return number

    def close(self) -> None:
        """Kill and reap every worker (idempotent)."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.close()

    async def run(
        self,
        jobs: Sequence[Job],
        command: Command,
        *,
        prepare: Prepare,
        call_cache: CallCache | None,
        concurrency: int,
        run_here: Callable[[Job], Coroutine[Any, Any, None]],
        done: Callable[[int, ExampleResult, bool], None],
    ) -> None:
        """Run `jobs`: the parent's share (the first of `deal`) through `run_here`, which hands
        its result to `done` itself, the others' in the workers, each run they report handed
        to `done(slot index, result, cacheable)` on this event loop. A worker that fails has
        the runs it did not report made through `run_here`.

        Raises:
            Whatever `run_here` or `done` raise (the workers are killed first).
        """
        shares = deal(jobs, self.n_workers)
        tag_of = {job[0]: self._tag(job[1]) for job in jobs}
        newest = max(tag_of.values())
        for worker in self._workers:
            if worker.known <= newest:  # it was forked before some of these examples existed
                worker.close()
        self._workers = [w for w in self._workers if not w.closed]
        mine = list(shares[0])
        while len(self._workers) < len(shares) - 1:
            worker = _fork(prepare, call_cache, concurrency, self._examples)
            if worker is None:
                break
            self._workers.append(worker)
        busy: list[tuple[_Worker, list[Job], bytes]] = []
        for share in shares[1:]:
            if len(busy) < len(self._workers):
                worker = self._workers[len(busy)]
                runs = [[index, key, trial, tag_of[index]] for index, _, key, trial in share]
                busy.append((worker, share, _json_frame([list(command), runs])))
            else:
                mine.extend(share)
        finished = False
        self._busy = True
        try:
            async with asyncio.TaskGroup() as group:
                for worker, share, frame in busy:
                    group.create_task(
                        _collect(
                            worker, frame, {j[0]: j for j in share}, done, call_cache, run_here
                        )
                    )
                for job in mine:
                    group.create_task(run_here(job))
            finished = True
        finally:
            self._busy = False
            keep: list[_Worker] = []
            for worker in self._workers:
                # an early end may leave a worker in the middle of runs nobody will read
                if finished and not worker.closed and worker.private_mib() <= RECYCLE_PRIVATE_MIB:
                    keep.append(worker)
                else:
                    worker.close()
            self._workers = keep


async def _send(worker: _Worker, frame: bytes) -> bool:
    """Write `frame` to the worker's command pipe without blocking the event loop (a command can
    be longer than the pipe's 64 KiB: a share of 500 runs of long example ids), within
    `SILENCE_S`; False (with a warning) when the pipe is gone or the worker reads nothing for
    that long."""
    loop = asyncio.get_running_loop()
    view = memoryview(frame)
    deadline = loop.time() + SILENCE_S
    try:
        while view:
            try:
                view = view[os.write(worker.cmd_fd, view) :]
                continue
            except BlockingIOError:
                pass
            ready: asyncio.Future[None] = loop.create_future()

            def writable(ready: asyncio.Future[None] = ready) -> None:
                if not ready.done():  # (called on every turn while writable, until removed)
                    ready.set_result(None)

            loop.add_writer(worker.cmd_fd, writable)
            try:
                await asyncio.wait_for(ready, max(0.0, deadline - loop.time()))
            finally:
                loop.remove_writer(worker.cmd_fd)
    except TimeoutError:
        why = f"read nothing for {SILENCE_S:g} s (stopped or deadlocked)"
    except OSError as exc:
        why = f"cannot send ({exc})"
    else:
        return True
    _log.warning("evaluation worker %d %s", worker.pid, why)
    return False


async def _collect(
    worker: _Worker,
    frame: bytes,
    jobs: dict[int, Job],
    done: Callable[[int, ExampleResult, bool], None],
    call_cache: CallCache | None,
    run_here: Callable[[Job], Coroutine[Any, Any, None]],
) -> None:
    """Send `frame` (the command with the worker's runs, `jobs`), then hand each run it reports to `done`
    until its `done` frame; when it ends, fails or falls silent first, close it and run the
    rest through `run_here`."""
    loop = asyncio.get_running_loop()
    messages: asyncio.Queue[Any] = asyncio.Queue()
    finished = False

    def readable() -> None:
        try:
            chunk = os.read(worker.res_fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError as exc:
            chunk = b""
            _log.warning("evaluation worker %d: pipe error %s", worker.pid, exc)
        if not chunk:
            loop.remove_reader(worker.res_fd)
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
                messages.put_nowait(_decode(payload))
            except Exception as exc:  # noqa: BLE001 (a damaged frame: run the rest here)
                messages.put_nowait(("failed", f"unreadable frame ({type(exc).__name__})"))

    if not worker.closed and await _send(worker, frame):
        loop.add_reader(worker.res_fd, readable)
        try:
            while True:
                try:
                    message = await asyncio.wait_for(messages.get(), SILENCE_S)
                except TimeoutError:
                    _log.warning(
                        "evaluation worker %d sent nothing for %g s (stopped or deadlocked)",
                        worker.pid,
                        SILENCE_S,
                    )
                    break
                if message is None:
                    break
                kind = message[0]
                if kind == "alive":
                    continue
                if kind == "results":
                    for index, result, cacheable in message[1]:
                        if jobs.pop(index, None) is not None:
                            done(index, result, cacheable)
                elif kind == "done":
                    new, (hits, misses, uncacheable) = message[1], message[2]
                    if call_cache is not None:
                        for key, text in new:
                            call_cache.put(key, CallRecord.from_json(text))
                        call_cache.count(hits=hits, misses=misses, uncacheable=uncacheable)
                    finished = True
                    break
                else:
                    _log.warning("evaluation worker %d failed: %s", worker.pid, message[1])
                    break
        finally:
            if not worker.closed:
                loop.remove_reader(worker.res_fd)
    if finished and not jobs:
        return
    worker.close()
    rest = list(jobs.values())
    jobs.clear()
    if rest:
        _log.warning(
            "evaluation worker %d ended with %d run(s) unreported; running them here",
            worker.pid,
            len(rest),
        )
    async with asyncio.TaskGroup() as group:
        for job in rest:
            group.create_task(run_here(job))
