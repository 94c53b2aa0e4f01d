"""`MetaOrchestrator`: goal -> decompose -> find-or-spawn -> execute through hooks -> persist
-> aggregate.

`solve(goal)`:

1. **Decompose.** The planner runs with `output_type=TaskDecomposition`. `max_subtasks` caps
   every subtask started, nested ones included; those past it are not run: they are listed in
   `ExecutionResult.dropped_subtasks` (and an `orchestrator.dropped` event), never silently
   cut. The summary counts every subtask run, nested ones included.
2. **Find or spawn**, per subtask that requires an agent: an agent spawned earlier in this
   solve under the subtask's `agent_name`; else, with `memory`, a procedural roster entry for
   the subtask (its key, else the most similar trigger with similarity >= `roster_similarity`
   and reliability >= `roster_min_reliability`), hydrated from its stored `AgentSpec`; else
   the planner designs an `AgentSpec` (`output_type=AgentSpec`) and the factory spawns it
   (`aspawn`, so MCP discovery applies). `spawn_model` is passed as the factory's `model=`
   override (tests use function models).
3. **Execute through hooks** (`core.autonomy.hooks`): Continue, Skip, Redirect, Abort.
   A subtask may carry nested `subtasks`; they run one spawn level deeper, and a subtask
   deeper than `max_spawn_depth` is an error result naming the cap (nothing is spawned).
4. **Persist** a successful freshly spawned specialist (with `memory`): an episodic mirror
   (`"<goal> :: <subtask>"`) and a procedural skill keyed on the subtask trigger (its name),
   both with the spec in `metadata["agent_spec"]`. A roster specialist's outcome updates its
   reliability instead.
5. **Metacognition**: with a `MetacognitionConfig`, a successful output whose `confidence` is
   below the threshold makes the planner rewrite the remaining subtasks
   (`metacognition.redecomposition_triggered`), at most `max_redecompositions` times.
6. **Aggregate** into an `ExecutionResult`: the subtask results (a tree), a summary, the total
   wall time, cost, tokens and requests of every model call (planner and specialists, priced
   by `pricer` like search calls), and every hook decision.

A `MetaOrchestrator` holds no state across `solve` calls (runtime contract 3): everything a
solve learns lives in a per-call object, so one orchestrator can serve concurrent requests.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.usage import RunUsage

from core.agents.base import BaseAgent, GlobalState
from core.agents.providers import call_with_retries, current_policy
from core.agents.usage import model_name
from core.autonomy.events import EventBus
from core.autonomy.factory import AgentFactory
from core.autonomy.hooks import (
    Abort,
    HookContext,
    HookDecision,
    HookRunner,
    MetacognitionConfig,
    Redirect,
    Skip,
)
from core.autonomy.registry import ToolRegistry
from core.errors import HookAbortError, HookError, ProviderError
from core.evaluation.pricing import Pricer
from core.ir.agent_spec import AgentSpec
from core.memory.base import MemoryEntry, MemoryStore
from core.runtime.tracing import ModelUsage

__all__ = [
    "ExecutionResult",
    "HookRecord",
    "MetaOrchestrator",
    "SubTask",
    "SubTaskResult",
    "TaskDecomposition",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class SubTask(BaseModel):
    """One unit of work in a decomposition."""

    model_config = _CONFIG

    name: str = Field(min_length=1)
    """A short unique name (also the roster trigger)."""
    description: str = ""
    """What to do."""
    requires_agent: bool = True
    """False: nothing to run (recorded as done, with no output)."""
    agent_name: str | None = None
    """A specialist to reuse or to create under this name; None = designed per subtask."""
    subtasks: list[SubTask] = Field(default_factory=list["SubTask"])
    """Nested subtasks, run one spawn level deeper (then this subtask runs no agent)."""


class TaskDecomposition(BaseModel):
    """The planner's decomposition of a goal."""

    model_config = _CONFIG

    subtasks: list[SubTask]
    """The subtasks, in execution order."""
    reasoning: str = ""
    """Why this decomposition."""


class SubTaskResult(BaseModel):
    """The outcome of one subtask (a tree: nested subtasks are `children`)."""

    model_config = _CONFIG

    subtask_name: str
    """The subtask's name."""
    success: bool
    """Whether it produced an output."""
    output: Any = None
    """The specialist's output (a JSON-like value), a Skip stub, or None."""
    error: str | None = None
    """Why it failed, e.g. `"spawn depth 4 exceeds max_spawn_depth=3"`."""
    duration_ms: float = 0.0
    """Wall time, in ms."""
    agent_name: str | None = None
    """The agent that ran it."""
    agent_source: str | None = None
    """`"spawned"`, `"roster"` (from memory), `"reused"` (earlier in this solve), or None."""
    hook_decision: str = "continue"
    """The hook decision at its boundary."""
    confidence: float | None = None
    """The output's confidence, when it has one."""
    depth: int = 1
    """Its spawn depth."""
    cost_usd: float = 0.0
    """Cost of its model calls (agent design included), USD."""
    input_tokens: int = 0
    """Prompt tokens of its model calls."""
    output_tokens: int = 0
    """Completion tokens of its model calls."""
    children: list[SubTaskResult] = Field(default_factory=list["SubTaskResult"])
    """Results of nested subtasks."""


class HookRecord(BaseModel):
    """One hook decision, as recorded."""

    model_config = _CONFIG

    subtask: str
    """The subtask."""
    decision: str
    """`continue`, `skip`, `redirect` or `abort`."""
    detail: dict[str, Any] = Field(default_factory=dict[str, Any])
    """The decision's fields (stub, new_args, new_tool, reason)."""


class ExecutionResult(BaseModel):
    """What `MetaOrchestrator.solve` returns."""

    model_config = _CONFIG

    goal: str
    """The goal."""
    success: bool
    """Every subtask run succeeded and none was dropped."""
    subtask_results: list[SubTaskResult]
    """One per top-level subtask run, in order."""
    summary: str
    """A short text account."""
    total_duration_ms: float
    """Wall time of the solve, in ms."""
    cost_usd: float = 0.0
    """Cost of every model call of the solve, USD (NaN when a model is unpriced)."""
    input_tokens: int = 0
    """Prompt tokens of every model call."""
    output_tokens: int = 0
    """Completion tokens of every model call."""
    requests: int = 0
    """Model requests."""
    hook_decisions: list[HookRecord] = Field(default_factory=list[HookRecord])
    """Every hook decision, in order."""
    dropped_subtasks: list[str] = Field(default_factory=list[str])
    """Subtasks past `max_subtasks` (nested ones included), not run, in order."""
    redecompositions: int = 0
    """How many times metacognition re-decomposed."""
    spawned_agents: list[str] = Field(default_factory=list[str])
    """Names of the agents this solve spawned or took from the roster, in order."""
    unpriced_models: list[str] = Field(default_factory=list[str])
    """Models the pricer could not price."""
    trace: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    """The solve's events in order, each `{"topic", "ms" (since the solve started), ...its
    payload}` (the same events the bus gets)."""


def _confidence(output: Any) -> float | None:
    value: Any = None
    if isinstance(output, Mapping):
        value = cast(Mapping[str, Any], output).get("confidence")
    elif isinstance(output, BaseModel):
        value = getattr(output, "confidence", None)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _jsonable(output: Any) -> Any:
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json", by_alias=True)
    try:
        json.dumps(output)
    except (TypeError, ValueError):
        return str(output)
    return output


def _flatten(results: Sequence[SubTaskResult]) -> list[SubTaskResult]:
    """Every result of a result tree, parents before their children."""
    out: list[SubTaskResult] = []
    stack = list(reversed(results))
    while stack:
        result = stack.pop()
        out.append(result)
        stack.extend(reversed(result.children))
    return out


@dataclass
class _Ledger:
    usage: dict[str, ModelUsage] = field(default_factory=dict[str, ModelUsage])

    def add(self, name: str, run: RunUsage) -> ModelUsage:
        mine = ModelUsage(name, run.requests, run.input_tokens, run.output_tokens)
        total = self.usage.setdefault(name, ModelUsage(name))
        total.add(mine)
        return mine


@dataclass
class _Solve:
    """Everything one `solve` call knows (never shared between calls)."""

    goal: str
    agents: dict[str, BaseAgent[Any]] = field(default_factory=dict[str, BaseAgent[Any]])
    roster_ids: dict[str, str] = field(default_factory=dict[str, str])
    hooks: list[HookRecord] = field(default_factory=list[HookRecord])
    outputs: dict[str, Any] = field(default_factory=dict[str, Any])
    completed: list[str] = field(default_factory=list[str])
    ledger: _Ledger = field(default_factory=_Ledger)
    spawned: list[str] = field(default_factory=list[str])
    redecompositions: int = 0
    executed: int = 0
    """Subtasks started so far, nested ones included (what `max_subtasks` caps)."""
    dropped: list[str] = field(default_factory=list[str])
    started: float = field(default_factory=time.perf_counter)
    trace: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])


class MetaOrchestrator:
    """Decomposes a goal, spawns or finds specialists, runs them through hooks; see the module
    docstring.

    Args:
        planner: a `BaseAgent` (its runs are given `output_type=TaskDecomposition`, and
            `AgentSpec` to design a specialist).
        factory: spawns specialists from specs.
        registry: the tool registry (default: the factory's).
        memory: persists specialists (the roster); None = no persistence.
        hooks: a `HookRunner`, or a sequence of hooks; None = always Continue.
        max_subtasks: the most subtasks run per solve (nested ones and re-decompositions
            included).
        max_spawn_depth: the deepest spawn level (top-level subtasks are level 1).
        metacognition: enables confidence-driven re-decomposition.
        bus: receives the orchestrator's events.
        pricer: prices every model call; default `Pricer()`.
        spawn_model: passed to `factory.spawn(model=...)` (tests pass function models).
        roster_similarity: the least recall similarity that reuses a roster specialist.
        roster_min_reliability: the least reliability that reuses one.

    Raises:
        ValueError: `max_subtasks < 1` or `max_spawn_depth < 1`.
    """

    def __init__(
        self,
        planner: BaseAgent[Any],
        factory: AgentFactory,
        registry: ToolRegistry | None = None,
        memory: MemoryStore | None = None,
        hooks: HookRunner | Sequence[Any] | None = None,
        max_subtasks: int = 10,
        max_spawn_depth: int = 3,
        metacognition: MetacognitionConfig | None = None,
        bus: EventBus | None = None,
        *,
        pricer: Pricer | None = None,
        spawn_model: Model | str | None = None,
        roster_similarity: float = 0.8,
        roster_min_reliability: float = 0.3,
    ) -> None:
        if max_subtasks < 1 or max_spawn_depth < 1:
            raise ValueError("max_subtasks and max_spawn_depth must be at least 1")
        self.planner = planner
        self.factory = factory
        self.registry = registry if registry is not None else factory.registry
        self.memory = memory
        self.hooks = hooks if isinstance(hooks, HookRunner) else HookRunner(list(hooks or []))
        self.max_subtasks = max_subtasks
        self.max_spawn_depth = max_spawn_depth
        self.metacognition = metacognition
        self.bus = bus
        self.pricer = pricer if pricer is not None else Pricer()
        self.spawn_model = spawn_model
        self.roster_similarity = roster_similarity
        self.roster_min_reliability = roster_min_reliability
        self._planning_agents: dict[tuple[int, Any], Agent[Any, Any]] = {}

    # -- events and model calls ---------------------------------------------------------

    def _emit(self, run: _Solve, topic: str, **payload: Any) -> None:
        ms = round((time.perf_counter() - run.started) * 1000, 3)
        run.trace.append({"topic": topic, "ms": ms, **_jsonable(payload)})
        if self.bus is not None:
            self.bus.emit(topic, payload)

    def _planning_agent(self, output_type: Any) -> Agent[Any, Any]:
        """The planner as a pydantic-ai agent with `output_type` fixed at construction.

        Built once per output type and planner build (a per-run `output_type` makes pydantic-ai
        generate the output schema on every run: 13 ms of a specialist's design). It holds only
        configuration, never anything of a solve, and pydantic-ai agents run concurrently."""
        base = self.planner.agent
        key = (id(base), output_type)
        agent = self._planning_agents.get(key)
        if agent is None:
            agent = Agent(
                self.planner.model,
                output_type=output_type,
                instructions=self.planner.system_prompt or None,
                tools=list(self.planner.tools),
                name=self.planner.agent_name,
                model_settings=current_policy().model_settings(),
            )
            self._planning_agents = {
                k: v for k, v in self._planning_agents.items() if k[0] == id(base)
            }
            self._planning_agents[key] = agent
        return agent

    async def _plan(self, run: _Solve, prompt: str, output_type: Any) -> Any:
        usage = RunUsage()
        agent = self._planning_agent(output_type)
        name = model_name(self.planner.model)
        try:  # transient faults waited out; a persistent one raises ProviderError
            result = await call_with_retries(lambda: agent.run(prompt, usage=usage), model=name)
        finally:
            run.ledger.add(name, usage)
        return result.output

    async def _decompose(self, run: _Solve) -> TaskDecomposition:
        out: TaskDecomposition = await self._plan(
            run,
            f"Decompose this goal into subtasks (at most {self.max_subtasks}).\nGoal: {run.goal}",
            TaskDecomposition,
        )
        return out

    async def _redecompose(
        self, run: _Solve, remaining: Sequence[SubTask], confidence: float
    ) -> list[SubTask]:
        done = "\n".join(f"- {n}: {json.dumps(_jsonable(run.outputs[n]))}" for n in run.completed)
        todo = "\n".join(f"- {s.name}: {s.description}" for s in remaining) or "(none)"
        out: TaskDecomposition = await self._plan(
            run,
            f"Goal: {run.goal}\nThe last result had low confidence ({confidence:g}). "
            f"Completed:\n{done}\nRemaining subtasks:\n{todo}\n"
            "Rewrite the remaining subtasks.",
            TaskDecomposition,
        )
        return list(out.subtasks)

    async def _find_or_spawn(self, run: _Solve, subtask: SubTask) -> tuple[BaseAgent[Any], str]:
        if subtask.agent_name is not None and subtask.agent_name in run.agents:
            return run.agents[subtask.agent_name], "reused"
        if self.memory is not None:
            entry = self.memory.get("procedural", subtask.name)
            if entry is None:
                hits = await self.memory.recall(
                    f"{subtask.name} {subtask.description}",
                    memory_type="procedural",
                    k=1,
                    min_reliability=self.roster_min_reliability,
                    min_similarity=self.roster_similarity,
                )
                entry = hits[0].entry if hits else None
            if (
                entry is not None
                and entry.reliability >= self.roster_min_reliability
                and "agent_spec" in entry.metadata
            ):
                spec = AgentSpec.model_validate(entry.metadata["agent_spec"])
                agent = await self.factory.aspawn(spec, model=self.spawn_model)
                run.agents[subtask.agent_name or spec.name] = agent
                run.roster_ids[subtask.name] = entry.id
                run.spawned.append(spec.name)
                self._emit(run, "orchestrator.roster_hit", subtask=subtask.name, agent=spec.name)
                return agent, "roster"
        spec = await self._plan(
            run,
            f"Design one specialist agent (an AgentSpec) for this subtask of the goal.\n"
            f"Goal: {run.goal}\nSubtask: {subtask.name}: {subtask.description}\n"
            f"Registered tools: {', '.join(self.registry.list_all()) or '(none)'}"
            + (f"\nName it {subtask.agent_name!r}." if subtask.agent_name else ""),
            AgentSpec,
        )
        if subtask.agent_name is not None and spec.name != subtask.agent_name:
            spec = spec.model_copy(update={"name": subtask.agent_name})
        agent = await self.factory.aspawn(spec, model=self.spawn_model)
        run.agents[spec.name] = agent
        run.spawned.append(spec.name)
        self._emit(run, "orchestrator.spawned", subtask=subtask.name, agent=spec.name)
        return agent, "spawned"

    # -- one subtask ----------------------------------------------------------------------

    def _record_hook(self, run: _Solve, subtask: SubTask, decision: HookDecision) -> None:
        detail = decision.model_dump(mode="json", exclude={"kind"})
        run.hooks.append(HookRecord(subtask=subtask.name, decision=decision.kind, detail=detail))
        self._emit(run, "hook.decision", subtask=subtask.name, decision=decision.kind, **detail)

    def _usage_since(
        self, run: _Solve, before: dict[str, tuple[int, int, int]]
    ) -> tuple[float, int, int]:
        usages: list[ModelUsage] = []
        for name, total in run.ledger.usage.items():
            r0, i0, o0 = before.get(name, (0, 0, 0))
            usages.append(
                ModelUsage(
                    name, total.requests - r0, total.input_tokens - i0, total.output_tokens - o0
                )
            )
        quote = self.pricer.total(u for u in usages if u.requests or u.input_tokens)
        return (
            quote.cost_usd,
            sum(u.input_tokens for u in usages),
            sum(u.output_tokens for u in usages),
        )

    async def _execute(self, run: _Solve, subtask: SubTask, depth: int) -> SubTaskResult:
        start = time.perf_counter()
        before = {
            n: (u.requests, u.input_tokens, u.output_tokens) for n, u in run.ledger.usage.items()
        }

        def finish(**fields: Any) -> SubTaskResult:
            cost, tokens_in, tokens_out = self._usage_since(run, before)
            result = SubTaskResult(
                subtask_name=subtask.name,
                duration_ms=(time.perf_counter() - start) * 1000,
                depth=depth,
                cost_usd=cost,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                **fields,
            )
            self._emit(
                run,
                "orchestrator.subtask_finished",
                subtask=subtask.name,
                success=result.success,
                depth=depth,
                error=result.error,
            )
            return result

        run.executed += 1
        self._emit(run, "orchestrator.subtask_started", subtask=subtask.name, depth=depth)
        if depth > self.max_spawn_depth:
            self._emit(run, "orchestrator.depth_exceeded", subtask=subtask.name, depth=depth)
            return finish(
                success=False,
                error=f"spawn depth {depth} exceeds max_spawn_depth={self.max_spawn_depth}",
            )
        context = HookContext(
            goal=run.goal,
            depth=depth,
            completed=tuple(run.completed),
            outputs=dict(run.outputs),
        )
        decision = await self.hooks.decide(subtask, context)
        if self.hooks.hooks:
            self._record_hook(run, subtask, decision)
        if isinstance(decision, Abort):
            raise HookAbortError(decision.reason, subtask=subtask.name)
        if isinstance(decision, Skip):
            run.outputs[subtask.name] = decision.stub_result
            run.completed.append(subtask.name)
            return finish(
                success=True, output=_jsonable(decision.stub_result), hook_decision="skip"
            )
        if subtask.subtasks:
            children: list[SubTaskResult] = []
            for i, child in enumerate(subtask.subtasks):
                if self._over_cap(run, subtask.subtasks[i:]):
                    break
                children.append(await self._execute(run, child, depth + 1))
            ok = all(c.success for c in children)
            run.outputs[subtask.name] = {c.subtask_name: c.output for c in children}
            run.completed.append(subtask.name)
            return finish(
                success=ok,
                output=run.outputs[subtask.name],
                error=None if ok else "a nested subtask failed",
                hook_decision=decision.kind,
                children=children,
            )
        if not subtask.requires_agent:
            run.completed.append(subtask.name)
            run.outputs[subtask.name] = None
            return finish(success=True, hook_decision=decision.kind)
        extra: dict[str, Any] = {}
        agent: BaseAgent[Any] | None = None
        source: str | None = None
        try:
            if isinstance(decision, Redirect):
                extra = dict(decision.new_args)
                if decision.new_tool is not None:
                    agent = run.agents.get(decision.new_tool)
                    if agent is None:
                        return finish(
                            success=False,
                            error=f"redirect to unknown agent {decision.new_tool!r}",
                            hook_decision="redirect",
                        )
                    source = "reused"
            if agent is None:
                agent, source = await self._find_or_spawn(run, subtask)
            state = GlobalState(goal=run.goal, context=dict(run.outputs))
            prompt = f"Goal: {run.goal}\nSubtask {subtask.name}: {subtask.description}"
            if run.completed:
                prompt += "\nResults so far:\n" + "\n".join(
                    f"- {n}: {json.dumps(_jsonable(run.outputs[n]))}" for n in run.completed
                )
            usage = RunUsage()
            runner = agent
            try:
                output = await call_with_retries(
                    lambda: runner.run(state, prompt=prompt, usage=usage, **extra),
                    model=model_name(agent.model),
                )
            finally:
                run.ledger.add(model_name(agent.model), usage)
        except (HookAbortError, ProviderError):
            raise  # a provider that kept failing stops the solve, not just this subtask
        except Exception as exc:  # noqa: BLE001 (a failing subtask is a result, not a crash)
            await self._outcome(run, subtask, agent, source, False)
            return finish(
                success=False,
                error=f"{type(exc).__name__}: {exc}",
                agent_name=None if agent is None else agent.agent_name,
                agent_source=source,
                hook_decision=decision.kind,
            )
        run.outputs[subtask.name] = output
        run.completed.append(subtask.name)
        await self._outcome(run, subtask, agent, source, True)
        return finish(
            success=True,
            output=_jsonable(output),
            agent_name=agent.agent_name,
            agent_source=source,
            hook_decision=decision.kind,
            confidence=_confidence(output),
        )

    async def _outcome(
        self,
        run: _Solve,
        subtask: SubTask,
        agent: BaseAgent[Any] | None,
        source: str | None,
        success: bool,
    ) -> None:
        if self.memory is None or agent is None:
            return
        if source == "roster" and subtask.name in run.roster_ids:
            self.memory.update_reliability(run.roster_ids[subtask.name], success)
            return
        spec = getattr(agent, "spec", None)
        if source != "spawned" or not success or not isinstance(spec, AgentSpec):
            return
        spec_data = spec.model_dump(mode="json")
        await self.memory.remember(
            MemoryEntry(
                memory_type="episodic",
                key=f"{run.goal} :: {subtask.name}",
                content=f"{subtask.name}: {subtask.description}",
                metadata={"agent_spec": spec_data, "goal": run.goal, "subtask": subtask.name},
            )
        )
        await self.memory.remember(
            MemoryEntry(
                memory_type="procedural",
                key=subtask.name,
                content=f"{subtask.name} {subtask.description}",
                metadata={"agent_spec": spec_data, "trigger": subtask.name},
            )
        )
        self._emit(run, "memory.persisted", subtask=subtask.name, agent=spec.name)

    def _over_cap(self, run: _Solve, pending: Sequence[SubTask]) -> bool:
        """True (and `pending` listed as dropped) once `max_subtasks` subtasks have started."""
        if run.executed < self.max_subtasks:
            return False
        names = [s.name for s in pending]
        run.dropped.extend(names)
        self._emit(run, "orchestrator.dropped", subtasks=names, max_subtasks=self.max_subtasks)
        return True

    # -- the solve ----------------------------------------------------------------------

    async def solve(self, goal: str) -> ExecutionResult:
        """Solve `goal` (module docstring). Before it returns (or raises) it awaits the bus's
        coroutine handlers its events scheduled (`EventBus.drain`), so none is cut off.

        Raises:
            HookAbortError: a hook returned `Abort`.
            HookError: a hook raised; names the hook and the subtask, and carries the
                top-level results finished before it in `partial_results`.
            Exception: whatever the planner's decomposition raises (no subtask can run).
        """
        partial: list[SubTaskResult] = []
        try:
            return await self._solve(goal, partial)
        except HookError as exc:
            exc.partial_results = list(partial)
            raise
        finally:
            if self.bus is not None:
                await self.bus.drain()

    async def _solve(self, goal: str, results: list[SubTaskResult]) -> ExecutionResult:
        start = time.perf_counter()
        run = _Solve(goal=goal)
        self._emit(run, "orchestrator.solve_started", goal=goal)
        plan = await self._decompose(run)
        pending = list(plan.subtasks)
        self._emit(run, "orchestrator.decomposed", subtasks=[s.name for s in pending])
        dropped = run.dropped
        while pending:
            if self._over_cap(run, pending):
                break
            subtask = pending.pop(0)
            result = await self._execute(run, subtask, 1)
            results.append(result)
            meta = self.metacognition
            if (
                meta is not None
                and result.success
                and result.confidence is not None
                and result.confidence < meta.redecompose_threshold
                and run.redecompositions < meta.max_redecompositions
            ):
                run.redecompositions += 1
                self._emit(
                    run,
                    "metacognition.redecomposition_triggered",
                    subtask=subtask.name,
                    confidence=result.confidence,
                    threshold=meta.redecompose_threshold,
                    count=run.redecompositions,
                )
                pending = await self._redecompose(run, pending, result.confidence)
        usages = list(run.ledger.usage.values())
        quote = self.pricer.total(u for u in usages if u.requests or u.input_tokens)
        ok = all(r.success for r in results) and not dropped
        every = _flatten(results)
        n_ok = sum(r.success for r in every)
        summary = f"{n_ok}/{len(every)} subtasks succeeded"
        if dropped:
            summary += f"; {len(dropped)} dropped over max_subtasks={self.max_subtasks}"
        if run.redecompositions:
            summary += f"; re-decomposed {run.redecompositions}x"
        failed = [r for r in results if not r.success]
        if failed:
            summary += "; failed: " + ", ".join(f"{r.subtask_name} ({r.error})" for r in failed)
        self._emit(run, "orchestrator.solve_finished", goal=goal, success=ok, summary=summary)
        result = ExecutionResult(
            goal=goal,
            success=ok,
            subtask_results=results,
            summary=summary,
            total_duration_ms=(time.perf_counter() - start) * 1000,
            cost_usd=quote.cost_usd,
            input_tokens=sum(u.input_tokens for u in usages),
            output_tokens=sum(u.output_tokens for u in usages),
            requests=sum(u.requests for u in usages),
            hook_decisions=run.hooks,
            dropped_subtasks=dropped,
            redecompositions=run.redecompositions,
            spawned_agents=run.spawned,
            unpriced_models=list(quote.unpriced),
            trace=run.trace,
        )
        return result
