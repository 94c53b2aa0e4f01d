"""The call-level model cache: the key (trial, prompt, occurrence), and that a hit is charged
exactly what the call recorded."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.agents.call_cache import (
    CallCacheStats,
    CallRecord,
    InMemoryCallCache,
    agent_identity,
    call_key,
    use_call_cache,
)
from core.evaluation.call_cache import DuckDBCallCache, call_cache_path
from core.runtime import AgentStep
from core.runtime.tracing import MODEL_LATENCY_KEY, capture_trace, record_model_latency


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    async def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        prompt = next(p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart))
        record_model_latency(250.0)
        return ModelResponse(
            parts=[TextPart(content=f"echo {prompt} #{self.calls}")],
            usage=RequestUsage(input_tokens=10, output_tokens=5),
        )


def make(system_prompt: str = "be brief") -> tuple[AgentStep, Counting]:
    counter = Counting()
    agent = Agent(FunctionModel(counter.respond, model_name="echo"), system_prompt=system_prompt)
    return AgentStep(agent, name="echo"), counter


def call(step: AgentStep, cache: Any, prompt: str, trial: int = 0, times: int = 1) -> Any:
    async def go() -> Any:
        with capture_trace() as trace, use_call_cache(cache, trial):
            outs = [await step.execute(prompt) for _ in range(times)]
        return outs, trace

    outs, trace = asyncio.run(go())
    usage = {
        k: (u.requests, u.input_tokens, u.output_tokens) for k, u in trace.usage_by_model().items()
    }
    latency = [s.attributes.get(MODEL_LATENCY_KEY) for s in trace.spans]
    return outs, usage, latency


def test_a_repeated_call_is_a_hit_charged_the_recorded_usage_and_model_time() -> None:
    step, counter = make()
    cache = InMemoryCallCache()
    first = call(step, cache, "2+2")
    second = call(step, cache, "2+2")
    assert first == (["echo 2+2 #1"], {"function:echo": (1, 10, 5)}, [250.0])
    assert second == first
    assert counter.calls == 1
    assert cache.stats() == CallCacheStats(hits=1, misses=1, uncacheable=0)
    assert cache.stats().summary_line() == (
        "call cache: 1 hits of 2 calls (50.0%), 1 new model calls"
    )


def test_another_trial_is_not_a_hit() -> None:
    step, counter = make()
    cache = InMemoryCallCache()
    assert call(step, cache, "2+2", trial=0)[0] == ["echo 2+2 #1"]
    assert call(step, cache, "2+2", trial=1)[0] == ["echo 2+2 #2"]
    assert call(step, cache, "2+2", trial=1)[0] == ["echo 2+2 #2"]
    assert counter.calls == 2
    assert cache.stats() == CallCacheStats(hits=1, misses=2, uncacheable=0)


def test_a_changed_prompt_or_system_prompt_is_not_a_hit() -> None:
    step, counter = make()
    cache = InMemoryCallCache()
    call(step, cache, "2+2")
    assert call(step, cache, "2+3")[0] == ["echo 2+3 #2"]
    other, other_counter = make(system_prompt="be verbose")
    assert call(other, cache, "2+2")[0] == ["echo 2+2 #1"]
    assert (counter.calls, other_counter.calls) == (2, 1)
    assert cache.stats().hits == 0


def test_identical_calls_within_one_run_are_distinct_calls() -> None:
    step, counter = make()
    cache = InMemoryCallCache()
    outs, usage, _ = call(step, cache, "q", times=3)
    assert outs == ["echo q #1", "echo q #2", "echo q #3"]
    assert usage == {"function:echo": (3, 30, 15)}
    assert call(step, cache, "q", times=3)[0] == outs  # the next run: three hits, in order
    assert counter.calls == 3
    assert cache.stats() == CallCacheStats(hits=3, misses=3, uncacheable=0)


def test_without_an_active_cache_every_call_runs() -> None:
    step, counter = make()
    call(step, None, "q")
    call(step, None, "q")
    assert counter.calls == 2


def test_records_persist_in_duckdb_across_processes(tmp_path: Path) -> None:
    path = call_cache_path(tmp_path / "runs.duckdb")
    assert path.name == "runs.duckdb.calls.duckdb"
    step, counter = make()
    cache = DuckDBCallCache(path, "p:1")
    first = call(step, cache, "2+2")
    assert cache.n_pending == 1
    cache.flush()
    assert cache.n_pending == 0
    again = DuckDBCallCache(path, "p:1")
    assert len(again) == 1
    assert call(step, again, "2+2") == first
    assert counter.calls == 1
    assert len(DuckDBCallCache(path, "p:2")) == 0  # another problem or config: nothing shared


def test_a_damaged_file_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "x.calls.duckdb"
    path.write_bytes(b"not a duckdb file at all" * 100)
    with caplog.at_level(logging.WARNING):
        cache = DuckDBCallCache(path, "p:1")
    assert not cache.usable
    assert "in memory only" in caplog.text
    step, counter = make()
    call(step, cache, "2+2")
    cache.flush()  # nothing written, nothing raised
    assert call(step, cache, "2+2")[0] == ["echo 2+2 #1"]
    assert counter.calls == 1
    assert path.read_bytes() == b"not a duckdb file at all" * 100


def test_record_round_trips_and_rejects_garbage() -> None:
    rec = CallRecord('"x"', (("m", 1, 2, 3),), 12.5)
    assert CallRecord.from_json(rec.to_json()) == rec
    with pytest.raises(ValueError, match="not a call record"):
        CallRecord.from_json('{"output": 1}')


class _Reply(BaseModel):
    text: str
    n: int


@pytest.mark.parametrize(
    ("agent_kwargs", "prompt"),
    [
        ({"system_prompt": "be brief"}, "What is 2+2?"),
        ({"system_prompt": ("a", "ünïcode ✓"), "instructions": "step by step"}, "é"),
        ({"output_type": _Reply, "model_settings": {"temperature": 0.0, "seed": 3}}, "q"),
        ({}, {"question": "How many?", "candidates": [{"run": "x", "answer": 1.5}]}),
    ],
)
def test_call_key_is_the_sha256_of_the_documented_canonical_payload(
    agent_kwargs: dict[str, Any], prompt: Any
) -> None:
    # The key is assembled from cached parts; it must equal, byte for byte, the documented
    # digest of the whole payload, so caches written before the fast path stay valid.
    agent = Agent(FunctionModel(Counting().respond, model_name="echo"), **agent_kwargs)
    identity = agent_identity(agent)
    assert identity is not None
    payload = {"agent": "a1", "model": "function:echo", "identity": identity, "prompt": prompt}
    payload["trial"] = 2
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected = hashlib.sha256(text.encode()).hexdigest()
    assert call_key(agent, prompt, 2, name="a1") == expected
    assert call_key(agent, prompt, 2, name="a1") == expected  # (the cached identity again)
    assert call_key(agent, prompt, 3, name="a1") != expected


def test_call_key_refuses_a_prompt_that_is_not_json_data() -> None:
    agent = Agent(FunctionModel(Counting().respond, model_name="echo"))
    assert call_key(agent, object(), 0, name="a1") is None
    assert call_key(agent, {1: "x", "a": "y"}, 0, name="a1") is None  # keys not sortable


def test_a_ctrl_c_during_a_flush_is_a_keyboard_interrupt_and_keeps_the_batch(
    tmp_path: Path,
) -> None:
    # DuckDB reports a Ctrl-C during its scan as RuntimeError('Query interrupted'); the CLI's
    # second Ctrl-C landed there and was printed as an internal error. The signal lands 10 ms
    # into a flush of 400,000 records (seconds of work), wherever it lands: Python code or the
    # DuckDB scan, it must come out as a KeyboardInterrupt with nothing of the batch lost.
    import os
    import signal

    cache = DuckDBCallCache(tmp_path / "c.duckdb", "p:1")
    record = CallRecord('"x"', (("m", 1, 2, 3),), 1.5)
    for i in range(400_000):
        cache.put(f"k{i}", record)
    previous = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        with pytest.raises(KeyboardInterrupt):
            cache.flush()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert cache.n_pending == 400_000


class _InterruptedConnection:
    """A DuckDB connection whose every statement is stopped by a Ctrl-C, as DuckDB reports one
    that arrives while it runs a statement: `duckdb.InterruptException` (a `duckdb.Error`)."""

    def execute(self, *args: object) -> Any:
        import duckdb

        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    def close(self) -> None:
        pass


def test_an_interrupt_exception_in_a_flush_is_a_keyboard_interrupt_not_a_broken_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # InterruptException is a duckdb.Error: caught as one, a Ctrl-C disabled the cache for the
    # rest of the run (a warning, exit 0) instead of stopping it
    import core.evaluation.call_cache as module

    cache = DuckDBCallCache(tmp_path / "c.duckdb", "p:1")
    cache.put("k", CallRecord('"x"', (("m", 1, 2, 3),), 1.5))
    monkeypatch.setattr(module.duckdb, "connect", lambda *a, **k: _InterruptedConnection())
    with pytest.raises(KeyboardInterrupt):
        cache.flush()
    assert (cache.usable, cache.n_pending) == (True, 1)
    monkeypatch.undo()
    cache.flush()
    assert (cache.usable, cache.n_pending) == (True, 0)
    assert DuckDBCallCache(tmp_path / "c.duckdb", "p:1").get("k") == CallRecord(
        '"x"', (("m", 1, 2, 3),), 1.5
    )


def test_a_journal_load_stopped_by_ctrl_c_is_an_interrupt_not_a_rejected_file() -> None:
    from core.storage._ingest import load_delta_from_file

    with pytest.raises(KeyboardInterrupt):
        load_delta_from_file(_InterruptedConnection(), Path("j.jsonl"))  # type: ignore[arg-type]


def test_the_key_parts_are_json_dumps_byte_for_byte() -> None:
    from core.agents.call_cache import _dump  # pyright: ignore[reportPrivateUsage]

    def reference(v: object) -> str:
        return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    values: list[object] = [
        "",
        "plain",
        'quote " and backslash \\',
        "tab\tnewline\ncontrol\x01",
        "héllo ✓ 数学 \U0001f600",
        "\ud800 lone surrogate",
        0,
        -17,
        10**30,
        True,
        False,
        None,
        1.5,
        {"b": 1, "a": [1, "x"]},
    ]
    assert [_dump(v) for v in values] == [reference(v) for v in values]
    assert _dump(True) == "true" and _dump(1) == "1"


def test_a_flush_in_several_statements_stores_all_or_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    import core.evaluation.call_cache as module

    monkeypatch.setattr(module, "_FLUSH_BATCH", 2)  # 5 records: statements of 2, 2 and 1
    real_connect = duckdb.connect
    inserts: list[int] = []
    armed = [True]

    class StopsOnSecondInsert:
        def __init__(self, con: Any) -> None:
            self._con = con

        def execute(self, sql: str, *args: Any) -> Any:
            if sql.startswith("INSERT"):
                inserts.append(len(args[0][1]))
                if armed[0] and len(inserts) == 2:
                    raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
            return self._con.execute(sql, *args)

        def close(self) -> None:
            self._con.close()

    path = tmp_path / "c.duckdb"
    cache = DuckDBCallCache(path, "p:1")
    records = {f"k{i}": CallRecord(f'"{i}"', (("m", 1, i, 3),), float(i)) for i in range(5)}
    for key, record in records.items():
        cache.put(key, record)
    monkeypatch.setattr(
        module.duckdb, "connect", lambda *a, **k: StopsOnSecondInsert(real_connect(*a, **k))
    )
    with pytest.raises(KeyboardInterrupt):
        cache.flush()
    assert inserts == [2, 2] and cache.n_pending == 5
    assert len(DuckDBCallCache(path, "p:1")) == 0  # the first statement's 2 rows rolled back
    inserts.clear()
    armed[0] = False
    cache.flush()
    assert inserts == [2, 2, 1] and cache.n_pending == 0
    again = DuckDBCallCache(path, "p:1")
    assert {k: again.get(k) for k in records} == records
