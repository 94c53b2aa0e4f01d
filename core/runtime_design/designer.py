"""`RuntimeTopologyDesigner`: per request, a cached topology or a new design from an agent.

`await designer.design(goal, budget_usd=None, latency_ms=None) -> DesignResult`, in this order
(runtime contract 5):

1. **Cache.** `cache.lookup_hit(goal)`. With `verify_on_hit=True` (the default) the hit's spec is
   checked against the registries *as they are now* (`core.hydrate.validate_names`): a spec
   naming an agent or callable that is no longer registered (renamed, removed) is not
   returned; the entry is decayed (`cache.store(goal, spec, success=False)`) and the request
   is designed as on a miss. (The cache's own counters count that lookup as a hit, and the
   refusal as a decay.)
2. **Design.** The designer agent runs once on `design_prompt(goal)`, which states the
   request's limits when given (USD, ms per request) and lists the seed library, each entry
   with its measured accuracy, mean cost per request (USD) and mean latency per request (ms),
   and the registered names. There is no debug retry: runtime
   design is latency-bound. The agent is a `BaseAgent` or a pydantic-ai `Agent`; its output
   is a `TopologyDesign`, or its JSON text / mapping (parsed with `core.ir.parse_design`).
3. **Check.** A design whose spec names anything no registry resolves is a failure.

A failure of step 2 or 3 (the model call raised, the output is no valid `TopologyDesign`, the
spec names unknown things) raises `RuntimeDesignError`, or, when `fallback_spec` is given,
returns it (`source="fallback"`, the failure in `error`). The designer never stores into the
cache: the orchestrator does, once it knows how the run went.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from core.agents.providers import call_with_retries
from core.agents.usage import agent_model_name, run_agent
from core.errors import TopologyStudioError
from core.hydrate import (
    AgentRegistryLike,
    CallableRegistryLike,
    as_agent_registry,
    as_callable_registry,
    validate_names,
)
from core.ir.canonical import canonical_json
from core.ir.design import TopologyDesign, parse_design
from core.ir.models import TopologySpec
from core.runtime.tracing import ModelUsage
from core.runtime_design.caches import CacheHit, NoCache, TopologyCache

__all__ = [
    "DesignResult",
    "LibraryEntry",
    "RuntimeDesignError",
    "RuntimeTopologyDesigner",
]

_SPEC_ADAPTER: TypeAdapter[Any] = TypeAdapter(TopologySpec)


class RuntimeDesignError(TopologyStudioError):
    """The designer could not produce a usable topology for a request (and no fallback).

    Attributes:
        goal: the request's goal.
        reason: what failed, e.g. `"the designer agent raised RuntimeError: boom"`.
    """

    def __init__(self, goal: str, reason: str) -> None:
        self.goal = goal
        self.reason = reason
        super().__init__(f"runtime design failed for goal {goal!r}: {reason}")


class LibraryEntry(BaseModel):
    """A validated topology of the seed library with its measured figures.

    The figures are per request, as measured by the search that validated it; None when not
    measured (shown as "not measured" in the prompt).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    spec: TopologySpec
    """The topology."""
    accuracy: float | None = Field(default=None, ge=0.0, le=1.0)
    """Mean score in [0, 1] on the search's examples."""
    cost_usd: float | None = Field(default=None, ge=0.0)
    """Mean cost per request, USD."""
    latency_ms: float | None = Field(default=None, ge=0.0)
    """Mean wall time per request, ms."""
    label: str = ""
    """A short name for the entry (e.g. the search candidate's id); "" for none."""

    @field_validator("accuracy", "cost_usd", "latency_ms")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class DesignResult(BaseModel):
    """What the designer chose for one request."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    goal: str
    """The request's goal."""
    spec: TopologySpec
    """The topology to run."""
    source: Literal["cache", "designer", "fallback"]
    """Where the spec came from."""
    cache_hit: CacheHit | None = None
    """The cache entry used (`source == "cache"`), else None."""
    thought: str = ""
    """The designer's reasoning (`source == "designer"`)."""
    error: str | None = None
    """Why the design failed (`source == "fallback"`)."""
    rejected_hit: CacheHit | None = None
    """A cache hit refused by `verify_on_hit` (its spec named unknown things), else None."""
    usage: tuple[ModelUsage, ...] = ()
    """The designer agent's model usage (one per model; empty when it was not called)."""


def _figure(value: float | None, fmt: str) -> str:
    return "not measured" if value is None else fmt.format(value)


def _as_entry(item: Any, where: str) -> LibraryEntry:
    if isinstance(item, LibraryEntry):
        return item
    try:
        return LibraryEntry(spec=_SPEC_ADAPTER.validate_python(item))
    except Exception as exc:
        raise ValueError(
            f"seed_library{where}: expected a LibraryEntry or a TopologySpec: {exc}"
        ) from exc


class RuntimeTopologyDesigner:
    """Picks a cached topology or designs one per request (see the module docstring).

    Args:
        designer_agent: a `BaseAgent` or pydantic-ai `Agent` whose output is a
            `TopologyDesign` (or its JSON text).
        callable_registry: the callables a spec may name (a `CallableRegistry` or a mapping;
            a mapping is re-read at every check, so later changes are seen).
        agent_registry: the agents a spec may name (an `AgentRegistry` or a mapping of
            name -> zero-argument factory; re-read likewise).
        seed_library: validated topologies shown to the designer: `LibraryEntry`s, or bare
            specs (figures "not measured").
        cache: where designs are remembered (`NoCache()` by default).
        verify_on_hit: check a cache hit's names against the current registries.
        fallback_spec: returned instead of raising when a design fails; it must itself name
            only registered things at the time it is used.

    Raises:
        ValueError: a seed library entry is neither a `LibraryEntry` nor a valid spec, or
            `fallback_spec` is not a valid spec.
        TypeError: a registry is neither a registry nor a mapping.
    """

    def __init__(
        self,
        designer_agent: Any,
        callable_registry: CallableRegistryLike,
        agent_registry: AgentRegistryLike,
        seed_library: Iterable[Any] = (),
        cache: TopologyCache | None = None,
        verify_on_hit: bool = True,
        fallback_spec: Any = None,
    ) -> None:
        as_callable_registry(callable_registry)  # type check now, not at the first request
        as_agent_registry(agent_registry)
        self.designer_agent = designer_agent
        self.callable_registry = callable_registry
        self.agent_registry = agent_registry
        self.seed_library: tuple[LibraryEntry, ...] = tuple(
            _as_entry(item, f"[{i}]") for i, item in enumerate(seed_library)
        )
        self.cache: TopologyCache = cache if cache is not None else NoCache()
        self.verify_on_hit = verify_on_hit
        if fallback_spec is not None:
            try:
                fallback_spec = _SPEC_ADAPTER.validate_python(fallback_spec)
            except Exception as exc:
                raise ValueError(f"fallback_spec is not a valid TopologySpec: {exc}") from exc
        self.fallback_spec: Any = fallback_spec

    def unknown_names(self, spec: Any) -> list[tuple[str, str, str]]:
        """`(json_path, kind, name)` per name in `spec` the current registries lack."""
        return validate_names(
            spec, callable_registry=self.callable_registry, agent_registry=self.agent_registry
        )

    def design_prompt(
        self, goal: str, *, budget_usd: float | None = None, latency_ms: float | None = None
    ) -> str:
        """The designer agent's user prompt for `goal`: the request, its limits when stated
        (cost USD to 6 decimals, latency ms to 1, per request), the seed library with its
        figures (accuracy to 4 decimals, cost USD to 6, latency ms to 1), the names."""
        lines = [f"Request: {goal}"]
        limits: list[str] = []
        if budget_usd is not None:
            limits.append(f"cost at most ${budget_usd:.6f}")
        if latency_ms is not None:
            limits.append(f"latency at most {latency_ms:.1f} ms")
        if limits:
            lines.append(f"Limits for this request: {' and '.join(limits)}.")
        lines.append("")
        if self.seed_library:
            lines.append(
                "Validated topologies, with their measured figures per request. Prefer reusing "
                "or specialising one of them; design a new one only when none fits."
            )
            for i, entry in enumerate(self.seed_library, start=1):
                label = f" {entry.label}" if entry.label else ""
                lines.append(
                    f"[{i}]{label} accuracy {_figure(entry.accuracy, '{:.4f}')}, "
                    f"cost {_figure(entry.cost_usd, '${:.6f}')}, "
                    f"latency {_figure(entry.latency_ms, '{:.1f} ms')}"
                )
                lines.append(canonical_json(entry.spec))
        else:
            lines.append("No validated topologies yet: design one from the registered names.")
        agents = as_agent_registry(self.agent_registry).names()
        calls = as_callable_registry(self.callable_registry).names()
        lines += [
            "",
            f"Registered agents: {', '.join(agents) or '(none)'}",
            f"Registered callables: {', '.join(calls) or '(none)'}",
            "Answer with a TopologyDesign: `thought` (why this topology) and `spec`.",
        ]
        return "\n".join(lines)

    async def design(
        self, goal: str, *, budget_usd: float | None = None, latency_ms: float | None = None
    ) -> DesignResult:
        """The topology for `goal` (see the module docstring).

        Args:
            goal: the request.
            budget_usd: the request's cost limit, USD, told to the designer agent (None: none).
            latency_ms: the request's latency limit, ms, told likewise (None: none). The cache
                is keyed on `goal` alone.

        Raises:
            RuntimeDesignError: the design failed and there is no `fallback_spec` (or the
                fallback names unknown things).
            ValueError, TypeError: `goal` is empty or not a string (from the cache).
        """
        hit = await self.cache.lookup_hit(goal)
        rejected: CacheHit | None = None
        if hit is not None:
            if not self.verify_on_hit or not self.unknown_names(hit.spec):
                return DesignResult(goal=goal, spec=hit.spec, source="cache", cache_hit=hit)
            rejected = hit
            await self.cache.store(goal, hit.spec, False)
        usage: dict[str, ModelUsage] = {}

        def record(name: str, *, requests: int, input_tokens: int, output_tokens: int) -> None:
            u = usage.setdefault(name, ModelUsage(model_name=name))
            u.add(ModelUsage(name, requests, input_tokens, output_tokens))

        try:
            prompt = self.design_prompt(goal, budget_usd=budget_usd, latency_ms=latency_ms)
            design = await self._run_designer(goal, prompt, record)
            unknown = self.unknown_names(design.spec)
            if unknown:
                listed = ", ".join(
                    f"{path}: unknown {kind} {name!r}" for path, kind, name in unknown
                )
                raise RuntimeDesignError(goal, f"the design names unregistered things ({listed})")
        except RuntimeDesignError as exc:
            return self._fallback(goal, exc, rejected, tuple(usage.values()))
        return DesignResult(
            goal=goal,
            spec=design.spec,
            source="designer",
            thought=design.thought,
            rejected_hit=rejected,
            usage=tuple(usage.values()),
        )

    async def _run_designer(self, goal: str, prompt: str, record: Any) -> TopologyDesign:
        try:  # transient faults waited out; a persistent one falls back like any failure
            output = await call_with_retries(
                lambda: run_agent(self.designer_agent, prompt, record=record, remote=True),
                model=agent_model_name(self.designer_agent),
            )
        except Exception as exc:
            raise RuntimeDesignError(
                goal, f"the designer agent raised {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(output, TopologyDesign):
            return output
        try:
            if isinstance(output, BaseModel):
                output = output.model_dump(mode="json")
            if not isinstance(output, str | bytes | Mapping):
                output = json.dumps(output)
            return parse_design(cast("str | bytes | Mapping[str, Any]", output))
        except Exception as exc:
            raise RuntimeDesignError(
                goal, f"the designer's output is not a valid TopologyDesign: {exc}"
            ) from exc

    def _fallback(
        self,
        goal: str,
        exc: RuntimeDesignError,
        rejected: CacheHit | None,
        usage: tuple[ModelUsage, ...],
    ) -> DesignResult:
        if self.fallback_spec is None:
            raise exc
        unknown = self.unknown_names(self.fallback_spec)
        if unknown:
            listed = ", ".join(f"{path}: unknown {kind} {name!r}" for path, kind, name in unknown)
            raise RuntimeDesignError(
                goal, f"{exc.reason}; and the fallback_spec names unregistered things ({listed})"
            ) from exc
        return DesignResult(
            goal=goal,
            spec=self.fallback_spec,
            source="fallback",
            error=exc.reason,
            rejected_hit=rejected,
            usage=usage,
        )
