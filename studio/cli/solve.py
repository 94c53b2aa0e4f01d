"""`solve "GOAL" --planner provider:model` and `roster`: the meta orchestrator from the shell.

`solve` runs `core.autonomy.MetaOrchestrator` on the goal with a progress line per subtask on
stderr, then prints each subtask (outcome, agent and where it came from, hook decision, time,
cost) and the summary with the solve's cost and tokens. Memory is the run database (`--db`):
the specialists it spawns join the roster, the next solve finds them, and the solve itself is
recorded (an episodic entry `solve: <time> <goal>` holding the `ExecutionResult`) for the
studio's Agents page. `--planner demo` is a scripted offline planner (one subtask per clause of
the goal, split at " and ", ";" and ","; specialists answering `done: <subtask>`), for trying
the command without a provider key.

`roster` lists the persisted specialists: trigger, agent, reliability, uses and successes.

Exit codes: `solve` 0 when every subtask succeeded, 1 otherwise; 2 for bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from typing import Any

from pydantic_ai.exceptions import UnexpectedModelBehavior, UserError

from core.agents import BaseAgent
from core.autonomy import (
    AgentFactory,
    BusEvent,
    EventBus,
    ExecutionResult,
    MetaOrchestrator,
    SubTask,
    TaskDecomposition,
    ToolRegistry,
)
from core.autonomy.testing import planner_model, specialist_model
from core.errors import ProviderError
from core.memory import DuckDBMemoryStore, MemoryEntry
from studio.cli._common import CliUsageError, ExitCode, resolve_db_path
from studio.cli._output import Output, fmt_usd

__all__ = ["SOLVE_KEY_PREFIX", "cmd_roster", "cmd_solve", "demo_decomposition", "record_solve"]

SOLVE_KEY_PREFIX = "solve: "
"""Key prefix of the episodic entries that record solves."""


def demo_decomposition(goal: str) -> TaskDecomposition:
    """The demo planner's plan: one subtask per clause of `goal` (split at " and ", ";", ","),
    named by its first two words in snake case."""
    clauses = [c.strip() for c in re.split(r"\band\b|;|,", goal) if c.strip()]
    subtasks: list[SubTask] = []
    for clause in clauses or [goal]:
        words = re.findall(r"[a-z0-9]+", clause.lower())[:2] or ["task"]
        name = "_".join(words)
        while any(s.name == name for s in subtasks):
            name += "_2"
        subtasks.append(SubTask(name=name, description=clause))
    return TaskDecomposition(subtasks=subtasks, reasoning="one subtask per clause")


async def record_solve(memory: DuckDBMemoryStore, result: ExecutionResult) -> MemoryEntry:
    """Record a solve in memory (episodic, key `solve: <unix time> <goal>`)."""
    return await memory.remember(
        MemoryEntry(
            memory_type="episodic",
            key=f"{SOLVE_KEY_PREFIX}{time.time():.3f} {result.goal}",
            content=result.goal,
            metadata={"execution_result": result.model_dump(mode="json")},
        )
    )


def _progress(out: Output) -> Any:
    def handler(event: BusEvent) -> None:
        p = event.payload
        indent = "  " * (int(p.get("depth", 1)) - 1)
        if event.topic == "orchestrator.decomposed":
            out.note(f"plan: {', '.join(p['subtasks'])}")
        elif event.topic == "orchestrator.subtask_started":
            out.note(f"{indent}- {p['subtask']} ...")
        elif event.topic == "orchestrator.subtask_finished":
            status = "ok" if p["success"] else f"failed: {p['error']}"
            out.note(f"{indent}  {p['subtask']}: {status}")
        elif event.topic == "orchestrator.dropped":
            out.note(f"dropped (over --max-subtasks): {', '.join(p['subtasks'])}")
        elif event.topic == "metacognition.redecomposition_triggered":
            out.note(f"low confidence {p['confidence']:g}: re-planning the rest")

    return handler


def cmd_solve(args: argparse.Namespace, out: Output) -> int:
    """`solve GOAL --planner provider:model`."""
    goal = str(args.goal).strip()
    if not goal:
        raise CliUsageError("solve: the GOAL must not be empty")
    planner_name = str(args.planner)
    if planner_name == "demo":
        planner = BaseAgent("planner", model=planner_model([demo_decomposition(goal)]))
        spawn_model: Any = specialist_model()
        default_model: Any = "test"
    else:
        if ":" not in planner_name:
            raise CliUsageError(
                f"solve: --planner must be provider:model (e.g. openai:gpt-4.1) or demo, not "
                f"{planner_name!r}"
            )
        planner = BaseAgent("planner", model=planner_name)
        spawn_model = args.model
        default_model = args.model or planner_name
    bus = EventBus()
    bus.subscribe("orchestrator.*", _progress(out))
    bus.subscribe("metacognition.*", _progress(out))
    memory = None if args.no_memory else DuckDBMemoryStore(resolve_db_path(args.db))
    try:
        orchestrator = MetaOrchestrator(
            planner=planner,
            factory=AgentFactory(ToolRegistry(), default_model=default_model),
            memory=memory,
            max_subtasks=args.max_subtasks,
            max_spawn_depth=args.max_spawn_depth,
            bus=bus,
            spawn_model=spawn_model,
        )
        try:
            result = asyncio.run(orchestrator.solve(goal))
        except ProviderError as exc:  # kept failing after the bounded wait, or refused
            out.error(f"solve: {exc}")
            return ExitCode.INTERRUPTED
        except UnexpectedModelBehavior as exc:  # the planner's own output failed its schema
            out.error(
                f"solve: the planner {planner_name!r} answered in a shape that fails its "
                f"output schema, also after pydantic-ai's output retry ({exc})"
            )
            return ExitCode.FAILED
        except UserError as exc:  # e.g. an unknown provider:model: a bad input, not a crash
            raise CliUsageError(f"solve: --planner/--model: {exc}") from None
        if memory is not None:
            asyncio.run(record_solve(memory, result))
    finally:
        if memory is not None:
            memory.close()
    rows = [
        [
            r.subtask_name,
            "ok" if r.success else "failed",
            r.agent_name,
            r.agent_source,
            r.hook_decision,
            f"{r.duration_ms:.0f}",
            fmt_usd(r.cost_usd),
        ]
        for r in result.subtask_results
    ]
    out.table(
        ["subtask", "outcome", "agent", "from", "hook", "ms", "cost"],
        rows,
        right=("ms", "cost"),
    )
    out.line(f"summary: {result.summary}")
    out.line(
        f"cost: {fmt_usd(result.cost_usd)} over {result.requests} model requests "
        f"({result.input_tokens} input, {result.output_tokens} output tokens), "
        f"{result.total_duration_ms:.0f} ms"
    )
    return ExitCode.OK if result.success else ExitCode.FAILED


def cmd_roster(args: argparse.Namespace, out: Output) -> int:
    """`roster`: the persisted specialists."""
    with DuckDBMemoryStore(resolve_db_path(args.db)) as memory:
        entries = memory.entries("procedural")
    rows: list[list[Any]] = []
    for e in entries:
        spec: dict[str, Any] = e.metadata.get("agent_spec", {})
        tools = [str(t.get("name")) for t in spec.get("tools", [])]
        rows.append(
            [
                e.key,
                spec.get("name"),
                f"{e.reliability:.3f}",
                e.uses,
                e.successes,
                ",".join(tools) or None,
            ]
        )
    if not rows:
        out.line("no specialists yet: `topology-studio solve GOAL` adds the ones it spawns")
        return ExitCode.OK
    out.table(
        ["trigger", "agent", "reliability", "uses", "successes", "tools"],
        rows,
        right=("reliability", "uses", "successes"),
    )
    return ExitCode.OK
