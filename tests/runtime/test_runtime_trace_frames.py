"""Trace frames: each task gets a frame of its own (through the loop's task factory while a trace
is active, or `fork_trace`), leaf records become spans when read, and the task factory is put
back as it was."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from core.runtime import FunctionStep, Parallel, Pipeline, RefinementLoop, Trace, capture_trace
from core.runtime.tracing import (
    critical_path_ms,
    current_frame,
    record_model_latency,
    record_usage,
    use_span,
)


def _tree(trace: Trace) -> list[tuple[str, str]]:
    """(name, parent name) per span, in span order."""
    spans = trace.spans
    return [(s.name, "" if s.parent_id is None else spans[s.parent_id].name) for s in spans]


def test_concurrent_tasks_that_suspend_mid_span_keep_their_parents() -> None:
    """Two branches that each suspend inside their spans (so their spans interleave in time):
    every span's parent is the one open where its task was created."""

    async def slow(x: str) -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return x + "s"

    async def fan(x: str) -> str:
        a = Pipeline([FunctionStep(slow, name="a1"), FunctionStep(slow, name="a2")], name="pa")
        b = Pipeline([FunctionStep(slow, name="b1"), FunctionStep(slow, name="b2")], name="pb")
        outs = await asyncio.gather(a.run(x), b.run(x))
        return "|".join(outs)

    async def go() -> tuple[str, Trace]:
        with capture_trace() as trace:
            out = await FunctionStep(fan, name="fan").execute("x")
        return out, trace

    out, trace = asyncio.run(go())
    assert out == "xss|xss"
    assert sorted(_tree(trace)) == sorted(
        [
            ("fan", ""),
            ("pa", "fan"),
            ("pb", "fan"),
            ("a1", "pa"),
            ("a2", "pa"),
            ("b1", "pb"),
            ("b2", "pb"),
        ]
    )
    # the two pipelines really ran side by side: b1 started before a1 ended
    by_name = {s.name: s for s in trace.spans}
    a1_end = by_name["a1"].end_ns
    assert a1_end is not None and by_name["b1"].start_ns < a1_end


def test_task_factory_is_chained_and_put_back_after_the_last_trace() -> None:
    made: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **kwargs)

    async def child() -> int:
        frame = current_frame()
        return -1 if frame is None else (frame.current if frame.current is not None else -2)

    async def go() -> tuple[list[Any], Any, Any]:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(factory)
        seen: list[Any] = []
        with capture_trace() as outer:
            hooked = loop.get_task_factory()
            with capture_trace():  # nested: the same hook, used twice
                seen.append(await asyncio.create_task(child()))
            assert loop.get_task_factory() is hooked  # still one trace active
            with use_span(None):
                seen.append(await asyncio.create_task(child()))
        after = loop.get_task_factory()
        seen.append(await asyncio.create_task(child()))  # no trace: no frame
        seen.append(len(outer.spans))
        return seen, hooked, after

    seen, hooked, after = asyncio.run(go())
    assert hooked is not factory
    assert after is factory
    assert seen == [-2, -2, -1, 0]
    child_name = "test_task_factory_is_chained_and_put_back_after_the_last_trace.<locals>.child"
    assert made[:3] == [child_name] * 3  # then asyncio.run's own shutdown tasks


def test_a_trace_entered_outside_the_loop_still_nests_parallel_branches() -> None:
    """`with capture_trace(): asyncio.run(...)`: no loop to hook, so `Parallel` forks its own
    branch frames; branches that suspend mid-span keep the parallel as parent."""

    async def slow(x: int) -> int:
        await asyncio.sleep(0)
        return x + 1

    par = Parallel(
        [
            Pipeline([FunctionStep(slow, name="a1"), FunctionStep(slow, name="a2")], name="pa"),
            Pipeline([FunctionStep(slow, name="b1")], name="pb"),
        ]
    )
    with capture_trace() as trace:
        out = asyncio.run(par.execute(0))
    assert out == [2, 1]
    assert _tree(trace) == [
        ("parallel", ""),
        ("pa", "parallel"),
        ("a1", "pa"),  # open while branch b starts: the spans interleave
        ("pb", "parallel"),
        ("b1", "pb"),
        ("a2", "pa"),
    ]


def test_a_running_function_step_reads_as_an_open_span_then_as_closed() -> None:
    snapshots: list[list[tuple[str, bool, str]]] = []
    holder: list[Trace] = []

    def peek(x: str) -> str:
        record_usage("m:x", input_tokens=5, output_tokens=2)
        record_model_latency(3.0)
        spans = holder[0].spans
        snapshots.append([(s.name, s.end_ns is None, s.output_summary) for s in spans])
        return x + "!"

    async def go() -> Trace:
        with capture_trace() as trace:
            holder.append(trace)
            await Pipeline([lambda s: s + "?", FunctionStep(peek)]).run("hi")
        return trace

    trace = asyncio.run(go())
    assert snapshots == [[("pipeline", True, ""), ("<lambda>", False, "hi?"), ("peek", True, "")]]
    spans = trace.spans
    assert spans == trace.spans and spans is not trace.spans  # a new list on every read
    assert [(s.name, s.input_summary, s.output_summary) for s in spans] == [
        ("pipeline", "hi", "hi?!"),
        ("<lambda>", "hi", "hi?"),
        ("peek", "hi?", "hi?!"),
    ]
    assert [u.to_dict() for u in spans[2].usage] == [
        {"model_name": "m:x", "requests": 1, "input_tokens": 5, "output_tokens": 2}
    ]
    assert spans[2].attributes == {"model_latency_ms": 3.0}
    assert critical_path_ms(trace) == 3.0


def test_a_failing_function_step_records_its_error_and_restores_the_current_span() -> None:
    def boom(x: int) -> int:
        raise KeyError(x)

    async def go() -> tuple[Trace, Any]:
        with capture_trace() as trace:
            try:
                await FunctionStep(boom).execute(4)
            except KeyError:
                pass
            frame = current_frame()
            current = None if frame is None else frame.current
        return trace, current

    trace, current = asyncio.run(go())
    assert current is None
    (span,) = trace.spans
    assert (span.name, span.input_summary, span.output_summary, span.error) == (
        "boom",
        "4",
        "",
        "KeyError: 4",
    )
    assert span.end_ns is not None and span.end_ns >= span.start_ns


def test_a_loop_with_a_deadline_traces_its_iterations_under_itself() -> None:
    async def refine(x: int) -> int:
        await asyncio.sleep(0)
        return x + 1

    loop = RefinementLoop(
        FunctionStep(refine, name="refine"),
        FunctionStep(lambda x: {"passed": x >= 2}, name="check"),
        lambda current, output, verdict: output,
        max_iterations=3,
        timeout=5.0,
    )

    async def go() -> tuple[Any, Trace]:
        with capture_trace() as trace:
            out = await loop.execute(0)
        return out, trace

    out, trace = asyncio.run(go())
    assert out == 2
    assert _tree(trace) == [
        ("refinement_loop", ""),
        ("refine", "refinement_loop"),
        ("check", "refinement_loop"),
        ("refine", "refinement_loop"),
        ("check", "refinement_loop"),
    ]


def test_critical_path_of_a_fastest_race_is_the_winners_time() -> None:
    """Under merge `fastest` the run waits for the winner only: its model time counts, not the
    slowest branch's; under `collect_all` it waits for every branch: the max."""

    def timed(ms: float, turns: int) -> Any:
        async def call(x: str) -> str:
            record_model_latency(ms)
            for _ in range(turns):
                await asyncio.sleep(0)
            return f"{x}{ms:g}"

        return call

    def run(merge: str) -> tuple[Any, float | None, Any]:
        # branch 1 finishes first (fewer event-loop turns), branch 0 is slow
        par = Parallel([timed(30.0, 5), timed(10.0, 1), timed(20.0, 3)], merge=merge)

        async def go() -> tuple[Any, Trace]:
            with capture_trace() as trace:
                out = await par.execute("x")
            return out, trace

        out, trace = asyncio.run(go())
        return out, critical_path_ms(trace), trace.spans[0].attributes.get("winner")

    assert run("fastest") == ("x10", 10.0, 1)
    assert run("collect_all") == (["x30", "x10", "x20"], 30.0, None)


def test_a_task_factory_of_the_old_signature_and_an_explicit_context_still_work() -> None:
    """asyncio calls a factory as `(loop, coro)` when no context is given, and a task created
    with `context=ctx` runs in `ctx` itself: both hold inside a trace."""
    var: contextvars.ContextVar[str | None] = contextvars.ContextVar("var", default=None)
    made: list[int] = []

    def legacy(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
        made.append(1)
        return asyncio.Task(coro, loop=loop)

    async def setter() -> None:
        var.set("set by the task")

    async def in_ctx(x: str) -> str | None:
        ctx = contextvars.copy_context()
        await asyncio.get_running_loop().create_task(setter(), context=ctx)
        return ctx.get(var)

    async def slow(x: str) -> str:
        await asyncio.sleep(0)
        return x

    async def go() -> tuple[Any, Any, Trace, Trace]:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(legacy)
        with capture_trace() as first:
            merged = await Parallel([slow, slow], name="par").execute("x")
        loop.set_task_factory(None)  # with context=, asyncio itself passes it to a factory
        with capture_trace() as second:
            seen = await FunctionStep(in_ctx, name="ctx").execute("y")
        return merged, seen, first, second

    merged, seen, first, second = asyncio.run(go())
    assert (merged, seen) == (["x", "x"], "set by the task")
    assert _tree(first) == [("par", ""), ("slow", "par"), ("slow", "par")]
    assert _tree(second) == [("ctx", "")]
    assert len(made) >= 2  # the branches went through the user's factory


def test_a_trace_ending_while_another_runs_leaves_the_other_its_factory() -> None:
    """Trace A is active; the user sets a factory of their own (not chaining); trace B starts.
    A ends first: B's tasks still get frames of their own."""

    async def a(x: str) -> str:
        await asyncio.sleep(0.002)
        return x

    async def b(x: str) -> str:
        await asyncio.sleep(0.004)
        return x

    step_a, step_b = FunctionStep(a, name="a"), FunctionStep(b, name="b")

    async def fan(x: str) -> str:
        await asyncio.gather(step_a.execute(x), step_b.execute(x))
        return x

    def mine(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        return asyncio.Task(coro, loop=loop, **kw)

    async def go() -> tuple[Trace, Any]:
        loop = asyncio.get_running_loop()
        a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()
        box: list[Trace] = []

        async def trace_a() -> None:
            with capture_trace():
                a_in.set()
                await b_in.wait()
            a_out.set()

        async def trace_b() -> None:
            await a_in.wait()
            loop.set_task_factory(mine)
            with capture_trace() as tb:
                b_in.set()
                await a_out.wait()
                await FunctionStep(fan, name="fan").execute("x")
            box.append(tb)

        await asyncio.gather(trace_a(), trace_b())
        return box[0], loop.get_task_factory()

    trace, after = asyncio.run(go())
    assert _tree(trace) == [("fan", ""), ("a", "fan"), ("b", "fan")]
    assert after is mine


def test_a_trace_entered_outside_the_loop_hooks_it_at_the_first_composite_span() -> None:
    async def a(x: str) -> str:
        await asyncio.sleep(0.002)
        return x

    async def b(x: str) -> str:
        await asyncio.sleep(0.004)
        return x

    step_a, step_b = FunctionStep(a, name="a"), FunctionStep(b, name="b")

    async def fan(x: str) -> str:
        await asyncio.gather(step_a.execute(x), step_b.execute(x))
        record_usage("m", input_tokens=5)
        await FunctionStep(lambda s: s, name="c").execute(x)
        return x

    with capture_trace() as trace:
        asyncio.run(Pipeline([FunctionStep(fan, name="fan")], name="p").run("x"))
    assert _tree(trace) == [("p", ""), ("fan", "p"), ("a", "fan"), ("b", "fan"), ("c", "fan")]
    assert [[u.model_name for u in s.usage] for s in trace.spans] == [[], ["m"], [], [], []]


def test_spans_read_before_a_late_task_adds_one_are_not_changed_by_it() -> None:
    background: list[asyncio.Task[Any]] = []

    async def spawn(x: str) -> str:
        async def later() -> None:
            await asyncio.sleep(0.001)
            await FunctionStep(lambda s: s, name="late").execute("bg")

        background.append(asyncio.get_running_loop().create_task(later()))
        return x

    async def go() -> tuple[list[str], list[str], list[str]]:
        with capture_trace() as trace:
            await Pipeline([FunctionStep(spawn, name="spawn")], name="p").run("x")
        read = trace.spans
        before = [s.name for s in read]
        await asyncio.gather(*background)
        return before, [s.name for s in read], [s.name for s in trace.spans]

    before, same_list_later, read_again = asyncio.run(go())
    assert before == same_list_later == ["p", "spawn"]
    assert read_again == ["p", "spawn", "late"]


def test_a_trace_exited_in_another_task_still_puts_the_factory_back() -> None:
    async def traced_gen() -> Any:
        with capture_trace() as trace:
            yield trace
            yield trace

    async def go() -> tuple[str, Any]:
        loop = asyncio.get_running_loop()
        gen = traced_gen()
        await loop.create_task(gen.__anext__())  # entered in one task
        try:
            await loop.create_task(gen.aclose())  # exited in another: the reset fails
            raised = "nothing"
        except ValueError:
            raised = "ValueError"
        return raised, loop.get_task_factory()

    assert asyncio.run(go()) == ("ValueError", None)


def test_the_winner_of_a_race_counts_even_when_its_span_opened_last() -> None:
    """A custom step that waits before it delegates opens its span after the other branch's:
    the race's time is still the winner's (the first child span to end without an error)."""

    async def slow(x: str) -> str:
        record_model_latency(1000.0)
        await asyncio.sleep(0.01)
        return "slow"

    async def fast(x: str) -> str:
        record_model_latency(10.0)
        await asyncio.sleep(0)
        return "fast"

    slow_step = FunctionStep(slow, name="slow")

    class Throttled:
        step_name = "throttled"

        async def execute(self, x: Any) -> Any:
            await asyncio.sleep(0)
            return await slow_step.execute(x)

    async def go() -> tuple[Any, Trace]:
        with capture_trace() as trace:
            out = await Parallel([Throttled(), fast], merge="fastest", name="race").execute("q")
        return out, trace

    out, trace = asyncio.run(go())
    assert out == "fast"
    assert _tree(trace) == [("race", ""), ("fast", "race"), ("slow", "race")]
    assert critical_path_ms(trace) == 10.0
