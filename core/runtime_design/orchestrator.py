"""`TopologyOrchestrator`: design (or recall) a topology per request, run it, learn from the run.

`await orchestrator.execute(goal, input=None) -> TopologyExecutionResult`, in this order
(runtime contracts 9 and 11):

1. **Design.** `designer.design(goal)` (a `RuntimeTopologyDesigner`): a cache hit verified
   against the registries, else one design call, else the designer's `fallback_spec`. A
   design failure without a fallback raises `RuntimeDesignError`: nothing ran.
2. **Run.** The spec is hydrated with `core.hydrate.topology_from_spec` on the designer's own
   registries and executed on `input` (the goal itself when `input` is None), inside its own
   `capture_trace()` exactly as the evaluator runs an example (`core.evaluation._run`). A run
   never raises: a hydration error or an exception of the topology becomes `success=False`
   with `error="<ExceptionType>: <message>"` (cancellation propagates).
3. **Judge** (optional). `output_judge(goal, output) -> bool`, sync or async, is asked about
   every output of a run that did not raise; False makes the request a failure
   (`error="judged_wrong: ..."`). A judge that raises or answers something other than a bool
   makes the request a failure too, but says nothing about the topology, so the cache is left
   alone (`error="output_judge_error: ..."`).
4. **Learn.** For a spec from the cache or the designer: a success stores
   `(goal, spec, True)` (adds or refreshes the entry); an exception or a False verdict stores
   `(goal, spec, False)`, which decays the entry that served the goal (x0.7, see
   `core.runtime_design.caches`). A fallback spec is never stored: it stands in for a design
   that failed, and caching it would keep serving it after the designer recovers.

Cost (USD) is the `pricer` over every model call of the request: the designer's call
(`design_cost_usd`, 0.0 on a cache hit) plus the run's calls from its trace, retries included;
it is NaN when some model is unpriced under `Pricer(unknown="error")` (named in
`unpriced_models`). Tokens are prompt plus completion tokens of the same calls. Times are wall
clock ms from `clock` (seconds; default `time.perf_counter`); `model_ms` is the run's
critical-path model time when its models record any (replay models do), else None.

With a `bus` (`core.EventBus`), each request publishes, in order: `topology.designed`
(`goal`, `source`, `cache_hit`, and for a hit its `key`, `similarity` and `reliability`; for a
fallback the design's `error`), `topology.cache_stored` (`goal`, `success`) when the cache
learned from the request, and `topology.executed` (`goal`, `source`, `success`, `error`,
`verdict`, `cost_usd`, `tokens`, `duration_ms`); `execute` awaits the bus's async handlers
before it returns.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.evaluation.pricing import Pricer
from core.hydrate import topology_from_spec
from core.ir.models import TopologySpec
from core.runtime.tracing import capture_trace, critical_path_ms
from core.runtime_design.designer import DesignResult, RuntimeTopologyDesigner

if TYPE_CHECKING:
    from core.autonomy.events import EventBus

__all__ = ["OutputJudge", "TopologyExecutionResult", "TopologyOrchestrator"]

OutputJudge = Callable[[str, Any], "bool | Awaitable[bool]"]
"""`(goal, output) -> bool` (or an awaitable of it): True when the output answers the goal."""


class TopologyExecutionResult(BaseModel):
    """One request served by `TopologyOrchestrator.execute`."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    goal: str
    """The request's goal."""
    spec: TopologySpec
    """The topology that ran."""
    output: Any = None
    """What the topology returned; None when the run raised."""
    cache_hit: bool
    """True when the spec came from the cache (no design call)."""
    success: bool
    """The run did not raise and, with a judge, the judge said True."""
    error: str | None = None
    """Why it failed: `"<ExceptionType>: <message>"` for a run that raised,
    `"judged_wrong: ..."` for a False verdict, `"output_judge_error: ..."` for a judge that
    raised or did not answer a bool; None on success."""
    duration_ms: float = Field(ge=0.0)
    """Wall time of the whole request (design, run, judge and cache update), ms."""
    cost_usd: float
    """Cost of every model call of the request (design plus run), USD; NaN when a model is
    unpriced under `Pricer(unknown="error")`."""
    tokens: int = Field(ge=0)
    """Prompt plus completion tokens of every model call of the request."""
    trace: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    """The run's spans (`Span.to_dict()`, in start order); the design call is not a span."""
    source: Literal["cache", "designer", "fallback"]
    """Where the spec came from (`DesignResult.source`)."""
    verdict: bool | None = None
    """The output judge's answer; None without a judge, when the run raised, or when the
    judge failed."""
    design: DesignResult
    """The designer's result (the cache hit's similarity and reliability, the thought, a hit
    refused by `verify_on_hit`, the designer's usage)."""
    design_ms: float = Field(ge=0.0)
    """Wall time of the design step (cache lookup, and the design call on a miss), ms."""
    run_ms: float = Field(ge=0.0)
    """Wall time of hydrating and running the topology, ms."""
    model_ms: float | None = None
    """The run's critical-path model time, ms, when its models record any; else None."""
    design_cost_usd: float
    """Cost of the design call, USD (0.0 on a cache hit); NaN when its model is unpriced."""
    input_tokens: int = Field(ge=0)
    """Prompt tokens of every model call of the request."""
    output_tokens: int = Field(ge=0)
    """Completion tokens of every model call of the request."""
    requests: int = Field(ge=0)
    """Model requests of the request (design plus run)."""
    unpriced_models: list[str] = Field(default_factory=list[str])
    """Models the pricer could not price, sorted."""


class TopologyOrchestrator:
    """Serves requests with per-request topologies and feeds the outcomes back into the
    designer's cache (see the module docstring).

    Shares no state across `execute` calls except the designer's cache, so one orchestrator
    may serve concurrent requests.

    Args:
        designer: the `RuntimeTopologyDesigner` (its registries hydrate the spec, its cache
            learns from the runs).
        output_judge: `(goal, output) -> bool`, sync or async; a False verdict decays the
            entry like an exception. None: only exceptions count as failures (the guide's
            behaviour).
        pricer: prices every model call; default `Pricer()` (genai-prices; pydantic-ai's
            `FunctionModel`/`TestModel` free; other unpriced models make the cost NaN).
        clock: wall clock in seconds (default `time.perf_counter`); tests pass a fake one.
        bus: an `EventBus` that receives each request's events (see the module docstring).

    Raises:
        TypeError: `designer` is not a `RuntimeTopologyDesigner`, or `output_judge` is given
            and not callable.
    """

    def __init__(
        self,
        designer: RuntimeTopologyDesigner,
        output_judge: OutputJudge | None = None,
        *,
        pricer: Pricer | None = None,
        clock: Callable[[], float] | None = None,
        bus: EventBus | None = None,
    ) -> None:
        if not isinstance(designer, RuntimeTopologyDesigner):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                "TopologyOrchestrator designer: expected a RuntimeTopologyDesigner, "
                f"got {type(designer).__name__}"
            )
        if output_judge is not None and not callable(output_judge):
            raise TypeError(
                "TopologyOrchestrator output_judge: expected a callable (goal, output) -> bool, "
                f"got {type(output_judge).__name__}"
            )
        self.designer = designer
        self.output_judge = output_judge
        self.pricer = pricer if pricer is not None else Pricer()
        self._clock: Callable[[], float] = clock if clock is not None else time.perf_counter
        self.bus = bus

    async def execute(
        self, goal: str, input: Any = None, **design_options: Any
    ) -> TopologyExecutionResult:
        """Serve one request (see the module docstring).

        Args:
            goal: the request, as the designer and the cache see it.
            input: what the topology runs on; None: the goal itself.
            design_options: passed to `designer.design(goal, ...)`, e.g. a `LibraryDesigner`'s
                per-request `budget_usd=` (USD) and `latency_ms=` (ms); a designer that takes
                none raises `TypeError` for them.

        Returns:
            The `TopologyExecutionResult`; a failed run is reported in it, never raised.

        Raises:
            RuntimeDesignError: the design failed and the designer has no `fallback_spec`.
            ValueError, TypeError: `goal` is empty or not a string (from the cache).
        """
        clock = self._clock
        start = clock()
        design = await self.designer.design(goal, **design_options)
        designed = clock()
        self._designed(design)
        output: Any = None
        error: str | None = None
        with capture_trace() as trace:
            try:
                topology = topology_from_spec(
                    design.spec,
                    callable_registry=self.designer.callable_registry,
                    agent_registry=self.designer.agent_registry,
                )
                output = await topology.execute(goal if input is None else input)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
        ran = clock()

        verdict: bool | None = None
        judge_failed = False
        if error is None and self.output_judge is not None:
            verdict, error = await self._judge(goal, output)
            judge_failed = verdict is None
        success = error is None
        if design.source != "fallback" and not judge_failed:
            await self.designer.cache.store(goal, design.spec, success)
            self._emit("topology.cache_stored", goal=goal, success=success)
        finished = clock()

        run_usage = list(trace.usage_by_model().values())
        usages = [u for u in (*design.usage, *run_usage) if u.requests or u.input_tokens]
        quote = self.pricer.total(usages)
        design_quote = self.pricer.total(u for u in design.usage if u.requests or u.input_tokens)
        input_tokens = sum(u.input_tokens for u in usages)
        output_tokens = sum(u.output_tokens for u in usages)
        result = TopologyExecutionResult(
            goal=goal,
            spec=design.spec,
            output=output,
            cache_hit=design.source == "cache",
            success=success,
            error=error,
            duration_ms=_ms(start, finished),
            cost_usd=quote.cost_usd,
            tokens=input_tokens + output_tokens,
            trace=trace.to_list(),
            source=design.source,
            verdict=verdict,
            design=design,
            design_ms=_ms(start, designed),
            run_ms=_ms(designed, ran),
            model_ms=critical_path_ms(trace),
            design_cost_usd=design_quote.cost_usd,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            requests=sum(u.requests for u in usages),
            unpriced_models=list(quote.unpriced),
        )
        self._emit(
            "topology.executed",
            goal=goal,
            source=result.source,
            success=result.success,
            error=result.error,
            verdict=result.verdict,
            cost_usd=result.cost_usd,
            tokens=result.tokens,
            duration_ms=result.duration_ms,
        )
        if self.bus is not None:
            await self.bus.drain()
        return result

    def _emit(self, topic: str, **payload: Any) -> None:
        if self.bus is not None:
            self.bus.emit(topic, payload)

    def _designed(self, design: DesignResult) -> None:
        if self.bus is None:
            return
        payload: dict[str, Any] = {
            "goal": design.goal,
            "source": design.source,
            "cache_hit": design.source == "cache",
        }
        hit = design.cache_hit
        if hit is not None:
            payload.update(key=hit.key, similarity=hit.similarity, reliability=hit.reliability)
        if design.error is not None:
            payload["error"] = design.error
        self._emit("topology.designed", **payload)

    async def _judge(self, goal: str, output: Any) -> tuple[bool | None, str | None]:
        """`(verdict, error)`: `(True, None)`, `(False, "judged_wrong: ...")`, or
        `(None, "output_judge_error: ...")` when the judge raised or did not answer a bool."""
        judge = self.output_judge
        assert judge is not None
        try:
            value: Any = judge(goal, output)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return None, f"output_judge_error: the judge raised {type(exc).__name__}: {exc}"
        if not isinstance(value, bool):
            return None, (
                f"output_judge_error: the judge returned {type(value).__name__}, expected a bool"
            )
        if not value:
            return False, "judged_wrong: the output_judge rejected the output"
        return True, None


def _ms(start_s: float, end_s: float) -> float:
    """Seconds apart as ms (never negative: a clock that steps back reads 0)."""
    return max(0.0, (end_s - start_s) * 1000.0)
