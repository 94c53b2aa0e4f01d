"""TopologyEvaluator(workers=N): one evaluation's runs shared with forked children.

The rules under test (`core.evaluation._fork`): the same `CandidateEvaluation` as in one
process; runs dealt in turn by weight (`deal`); no fork below `MIN_RUNS_PER_WORKER` runs per
process; `on_example` once per run; one worker kept across
evaluations until it holds too much private memory; a worker's new call-cache records and
counters come back; a worker that dies has its runs made in the parent; an evaluation that
ends early, and an evaluator that is collected, leave no process behind.
"""

import asyncio
import logging
import os
import signal
import threading
import time
from typing import Any

import pytest
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.agents.call_cache import CallCacheStats, InMemoryCallCache
from core.errors import EvaluationError
from core.evaluation import _fork
from core.evaluation.evaluator import CandidateEvaluation, ExampleResult, TopologyEvaluator
from core.evaluation.example_memo import MEMO_PREFIX
from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.problems.config import SearchDefaults

models.ALLOW_MODEL_REQUESTS = False

pytestmark = pytest.mark.skipif(not _fork.fork_supported(), reason="forking needs Linux")

PARENT = os.getpid()


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of every worker forked during the test (`_fork._fork` wrapped)."""
    pids: list[int] = []
    original = _fork._fork  # pyright: ignore[reportPrivateUsage]

    def recording(*args: Any) -> Any:
        worker = original(*args)
        if worker is not None:
            pids.append(worker.pid)
        return worker

    monkeypatch.setattr(_fork, "_fork", recording)
    return pids


def assert_reaped(pids: list[int]) -> None:
    """Each worker was killed and reaped: not a child of this process any more, not even a
    zombie (other tests' processes may still be alive, so only these pids are asked about)."""
    assert pids
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def exact(output: Any, example: GoldExample) -> float:
    return 1.0 if str(output) == str(example.expected) else 0.0


def thirds(x: int) -> str:
    """Right (its own number) unless the number is a multiple of 3."""
    return "wrong" if x % 3 == 0 else str(x)


def whoami(x: int) -> str:
    return f"{x}@{os.getpid()}"


def dies_in_child(x: int) -> str:
    if os.getpid() != PARENT:
        os._exit(7)
    return str(x)


def examples(n: int) -> list[GoldExample]:
    return [GoldExample(input=i, expected=str(i), id=f"ex{i}") for i in range(n)]


def fn_spec(name: str) -> dict[str, Any]:
    return {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "function_step", "callable_name": name}}],
    }


def evaluator(workers: Any, **callables: Any) -> TopologyEvaluator:
    reg = CallableRegistry()
    for name, fn in callables.items():
        reg.register(name, fn)
    return TopologyEvaluator(
        callable_registry=reg,
        agent_registry=AgentRegistry(),
        score_fn=exact,
        latency_source="model",  # functions record no model time: 0 ms, the same everywhere
        workers=workers,
    )


def run(ev: TopologyEvaluator, spec: Any, exs: list[GoldExample], **kw: Any) -> CandidateEvaluation:
    return asyncio.run(ev.evaluate(spec, exs, **kw))


def test_forked_evaluation_is_the_same_as_one_process() -> None:
    exs = examples(100)
    one = run(evaluator(1, thirds=thirds), fn_spec("thirds"), exs)
    two = run(evaluator(2, thirds=thirds), fn_spec("thirds"), exs)
    assert two.model_dump() == one.model_dump()
    assert two.accuracy == 0.66  # 34 of 0..99 are multiples of 3
    assert [r.example_id for r in two.results] == [f"ex{i}" for i in range(100)]


WORKER_SHARE_OF_64 = [0, 2, 4, 6, 8, 10, 12, 13, 15, 17, 19, 21, 23, 24, 26, 28, 30, 32, 34, 36]
WORKER_SHARE_OF_64 += [37, 39, 41, 43, 45, 47, 49, 50, 52, 54, 56, 58, 60, 61, 63]
"""Runs 0..63 on 2 processes: 35 to the worker, 29 to the parent (weight 0.85 to 1)."""


def test_runs_are_dealt_by_weight_and_reported_once_each() -> None:
    seen: list[str] = []

    def on_example(result: ExampleResult) -> None:
        seen.append(result.example_id)

    ev = run(evaluator(2, whoami=whoami), fn_spec("whoami"), examples(64), on_example=on_example)
    pids = {r.example_id: int(r.output_summary.split("@")[1]) for r in ev.results}
    in_worker = {k for k, pid in pids.items() if pid != PARENT}
    assert in_worker == {f"ex{i}" for i in WORKER_SHARE_OF_64}
    assert len({pids[k] for k in in_worker}) == 1
    assert sorted(seen) == sorted(f"ex{i}" for i in range(64))


def test_one_worker_serves_evaluation_after_evaluation_until_it_is_closed(
    monkeypatch: pytest.MonkeyPatch, forked: list[int]
) -> None:
    ev = evaluator(2, whoami=whoami)
    exs = examples(64)

    def worker_pids(exs: list[GoldExample] = exs) -> set[int]:
        out = run(ev, fn_spec("whoami"), exs)
        return {int(r.output_summary.split("@")[1]) for r in out.results} - {PARENT}

    first, second = worker_pids(), worker_pids()
    assert len(first) == 1
    assert second == first
    fresh = worker_pids(examples(64))  # examples it was forked before: a fresh worker has them
    assert len(fresh) == 1 and fresh != first
    monkeypatch.setattr(_fork, "RECYCLE_PRIVATE_MIB", -1.0)  # every worker is "too big"
    third = worker_pids()
    assert third == fresh  # it is closed after the evaluation it served ...
    fourth = worker_pids()
    assert len(fourth) == 1
    assert fourth != fresh  # ... and a fresh one forked for the next
    ev.close_workers()
    assert_reaped(forked)
    assert len(forked) == 3


def test_a_collected_evaluator_leaves_no_worker_behind(forked: list[int]) -> None:
    ev = evaluator(2, whoami=whoami)
    run(ev, fn_spec("whoami"), examples(64))
    assert ev._pool is not None and ev._pool.pids == forked  # pyright: ignore[reportPrivateUsage]
    del ev  # (reference counting collects it at once: its finalizer closes the pool)
    assert_reaped(forked)


def test_an_evaluation_too_small_to_share_stays_in_the_parent(forked: list[int]) -> None:
    ev = run(evaluator(2, whoami=whoami), fn_spec("whoami"), examples(63))
    assert {int(r.output_summary.split("@")[1]) for r in ev.results} == {PARENT}
    assert forked == []  # nothing was forked
    assert _fork.deal(list(range(63)), 2) == [list(range(63))]  # type: ignore[arg-type]
    jobs: list[Any] = list(range(64))
    parent, worker = _fork.deal(jobs, 2)
    assert worker == WORKER_SHARE_OF_64
    assert parent == sorted(set(range(64)) - set(WORKER_SHARE_OF_64))
    assert [len(share) for share in _fork.deal(list(range(192)), 3)] == [57, 68, 67]  # type: ignore[arg-type]
    assert [len(share) for share in _fork.deal(list(range(95)), 3)] == [44, 51]  # type: ignore[arg-type]


def test_a_child_that_dies_has_its_runs_made_in_the_parent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exs = examples(80)
    with caplog.at_level(logging.WARNING, logger="core.evaluation._fork"):
        ev = run(evaluator(2, f=dies_in_child), fn_spec("f"), exs)
    assert ev.accuracy == 1.0
    assert ev.model_dump() == run(evaluator(1, f=dies_in_child), fn_spec("f"), exs).model_dump()
    # it died on its first run: all 43 of its share of 80 are made here
    assert "ended with 43 run(s) unreported; running them here" in caplog.text


def stops_in_child(x: int) -> str:
    if os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGSTOP)  # as `kill -STOP`, or a lock that never comes
    return str(x)


def test_a_stopped_worker_is_killed_and_its_runs_made_in_the_parent(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, forked: list[int]
) -> None:
    monkeypatch.setattr(_fork, "SILENCE_S", 0.5)
    exs = examples(80)
    with caplog.at_level(logging.WARNING, logger="core.evaluation._fork"):
        ev = run(evaluator(2, f=stops_in_child), fn_spec("f"), exs)
    assert ev.model_dump() == run(evaluator(1, f=stops_in_child), fn_spec("f"), exs).model_dump()
    assert "sent nothing for 0.5 s (stopped or deadlocked)" in caplog.text
    assert "ended with 43 run(s) unreported; running them here" in caplog.text
    assert_reaped(forked)  # killed (SIGKILL ends a stopped process) and reaped


def tail(x: str) -> str:
    return x[500:]


def test_a_worker_stopped_between_evaluations_cannot_block_the_parent(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, forked: list[int]
) -> None:
    ev = evaluator(2, f=tail)
    # long example ids: the worker's share of the next command is ~120 KB, past a pipe's 64 KiB
    big = [
        GoldExample(input="x" * 500 + str(i), expected=str(i), id=f"b{i}-" + "k" * 500)
        for i in range(400)
    ]
    run(ev, fn_spec("f"), big)  # forks the worker (after numbering every example)
    assert ev._pool is not None  # pyright: ignore[reportPrivateUsage]
    (pid,) = ev._pool.pids  # pyright: ignore[reportPrivateUsage]
    os.kill(pid, signal.SIGSTOP)
    monkeypatch.setattr(_fork, "SILENCE_S", 0.5)
    with caplog.at_level(logging.WARNING, logger="core.evaluation._fork"):
        out = run(ev, fn_spec("f"), big)
    assert out.accuracy == 1.0
    assert f"evaluation worker {pid} read nothing for 0.5 s (stopped or deadlocked)" in caplog.text
    ev.close_workers()
    assert_reaped(forked)


def test_a_share_bigger_than_the_pipe_is_sent_whole_without_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    worker = _fork._Worker(pid=-1, cmd_fd=write_fd, res_fd=read_fd)  # pyright: ignore[reportPrivateUsage]
    message = ["x" * 300_000, [1, 2, 3]]
    got = bytearray()

    def drain() -> None:  # a slow reader: the pipe fills and empties many times over
        while chunk := os.read(read_fd, 4096):
            got.extend(chunk)
            time.sleep(0.0005)

    reader = threading.Thread(target=drain)
    reader.start()
    with caplog.at_level(logging.WARNING):
        frame = _fork._json_frame(message)  # pyright: ignore[reportPrivateUsage]
        assert asyncio.run(_fork._send(worker, frame)) is True  # pyright: ignore[reportPrivateUsage]
    os.close(write_fd)
    reader.join()
    os.close(read_fd)
    assert bytes(got) == frame
    assert _fork._decode(bytes(got[8:])) == message  # pyright: ignore[reportPrivateUsage]
    assert caplog.text == ""  # (a writer callback run twice raised InvalidStateError, logged)


def test_two_evaluations_at_once_on_one_evaluator_keep_their_own_results() -> None:
    ev = evaluator(2, thirds=thirds, whoami=whoami)

    async def both() -> list[CandidateEvaluation]:
        return list(
            await asyncio.gather(
                ev.evaluate(fn_spec("thirds"), examples(100)),
                ev.evaluate(fn_spec("whoami"), examples(100)),
            )
        )

    first, second = asyncio.run(both())
    assert (
        first.model_dump()
        == run(evaluator(1, thirds=thirds), fn_spec("thirds"), examples(100)).model_dump()
    )
    assert first.accuracy == 0.66
    # the second ran in the parent alone: the workers were the first's
    assert {int(r.output_summary.split("@")[1]) for r in second.results} == {PARENT}


async def _whoami_slowly(x: int) -> str:
    await asyncio.sleep(0.1)
    return whoami(x)


def test_a_slow_worker_that_beats_is_left_to_finish(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_fork, "SILENCE_S", 0.3)
    monkeypatch.setattr(_fork, "HEARTBEAT_S", 0.05)
    monkeypatch.setattr(_fork, "BATCH", 1000)  # no results frame before the end, only beats:
    monkeypatch.setattr(_fork, "FLUSH_S", 1000.0)  # 35 runs, 8 at a time, 0.1 s each: 0.5 s
    with caplog.at_level(logging.WARNING, logger="core.evaluation._fork"):
        ev = run(evaluator(2, f=_whoami_slowly), fn_spec("f"), examples(64))
    in_worker = {r.example_id for r in ev.results if f"@{PARENT}" not in r.output_summary}
    assert in_worker == {f"ex{i}" for i in WORKER_SHARE_OF_64}
    assert caplog.text == ""


async def _slow_in_child(x: int) -> str:
    if os.getpid() != PARENT:
        await asyncio.sleep(0.5)
    return str(x)


def test_an_evaluation_that_ends_early_leaves_no_child_behind(forked: list[int]) -> None:
    class Stop(Exception):
        pass

    def on_example(result: ExampleResult) -> None:
        raise Stop(result.example_id)

    with pytest.raises(Stop, match="^ex1$"):  # the parent's first run (the worker has ex0)
        run(evaluator(2, f=_slow_in_child), fn_spec("f"), examples(64), on_example=on_example)
    assert_reaped(forked)  # killed and reaped: not even a zombie


def _echo_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = messages[-1].parts[-1].content  # type: ignore[union-attr]
    return ModelResponse(parts=[TextPart(str(prompt))])


def test_the_childs_call_cache_records_and_counters_come_back() -> None:
    agents = AgentRegistry()
    agents.register("echo", lambda: Agent(FunctionModel(_echo_model, model_name="echo")))
    spec = {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "agent_step", "agent_name": "echo"}}],
    }
    exs = examples(70)

    def fresh(workers: int, cache: InMemoryCallCache) -> TopologyEvaluator:
        return TopologyEvaluator(
            callable_registry=CallableRegistry(),
            agent_registry=agents,
            score_fn=exact,
            latency_source="model",
            workers=workers,
            call_cache=cache,
        )

    cache = InMemoryCallCache()
    cold = run(fresh(2, cache), spec, exs)
    assert cache.stats() == CallCacheStats(hits=0, misses=70, uncacheable=0)
    # 70 calls, and the 70 runs kept by the example memo (each answered by one stored call)
    keys = [k for k, _ in cache.records()]
    assert sum(k.startswith(MEMO_PREFIX) for k in keys) == 70
    assert len(cache) == 140
    cache.reset_stats()
    warm = run(fresh(2, cache), spec, exs)
    assert cache.stats() == CallCacheStats(hits=70, misses=0, uncacheable=0)
    assert cold.accuracy == warm.accuracy == 1.0
    alone = InMemoryCallCache()
    assert run(fresh(1, alone), spec, exs).model_dump() == cold.model_dump()
    assert alone._data == cache._data  # pyright: ignore[reportPrivateUsage]


def test_workers_are_checked_resolved_and_kept_by_with_options() -> None:
    with pytest.raises(EvaluationError, match="workers must be an int >= 1 or 'auto', not 0"):
        evaluator(0)
    auto = evaluator("auto")
    assert auto.workers == min(_fork.MAX_AUTO_WORKERS, len(os.sched_getaffinity(0)))
    assert evaluator(3).with_options(max_depth=2).workers == 3
    assert SearchDefaults().workers == 1
    assert SearchDefaults(workers="auto").workers == "auto"
    with pytest.raises(ValueError, match="workers"):
        SearchDefaults(workers=0)


def test_an_evaluation_off_the_main_thread_never_forks() -> None:
    out: list[CandidateEvaluation] = []
    thread = threading.Thread(
        target=lambda: out.append(run(evaluator(2, whoami=whoami), fn_spec("whoami"), examples(64)))
    )
    thread.start()
    thread.join()
    assert {int(r.output_summary.split("@")[1]) for r in out[0].results} == {PARENT}
