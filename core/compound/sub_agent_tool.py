"""`SubAgentTool`: a stateless sub-agent bound to an executor, a state updater and an optional
evaluator with bounded refinement.

One `run(state, prompt)`:

1. the agent runs (`agent.run(state, prompt=prompt, **agent_kwargs)`: extra keyword arguments
   are forwarded as they are), the executor turns its output into a result, and the state
   updater commits that first result to the state, always, before any refinement;
2. with an evaluator, the result is evaluated; while it does not pass and refinements remain
   (`max_refinements`), `build_refinement_prompt(result, prompt)` makes a new prompt from the
   latest result and the original prompt, and the agent + executor + evaluator cycle runs again;
   a result that beats the best so far (it passes where the best did not, or scores higher;
   a score of None is below every number) becomes the best and is committed to the state;
3. an exception in a refinement is caught and recorded in the history (`error`), and the
   refinement stops there: the best prior result is kept (best effort). An exception in the
   first pass is not caught (wrap the call in a retry if you want one).

`as_tool()` exposes the whole thing to a pydantic-ai agent as a tool taking a `prompt`; the
calling agent's `deps` (a `GlobalState`) is the state.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic_ai import RunContext, Tool

from core.agents.base import BaseAgent

__all__ = ["RefinementAttempt", "SubAgentEvalResult", "SubAgentResult", "SubAgentTool"]

StateT = TypeVar("StateT")
ResultT = TypeVar("ResultT")


class SubAgentEvalResult(BaseModel):
    """An evaluator's verdict on one result."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    passed: bool
    """Whether the result is good enough (no refinement after a pass)."""
    feedback: str = ""
    """What to improve (for the refinement prompt)."""
    score: float | None = None
    """Quality, higher is better; None = unscored."""


@dataclass(frozen=True, slots=True)
class RefinementAttempt:
    """One pass of the cycle.

    Attributes:
        attempt: 0 for the first pass, then 1, 2, ... for refinements.
        prompt: the prompt the agent got.
        result: the executor's result (None when the pass raised).
        evaluation: the evaluator's verdict (None without an evaluator or when it raised).
        error: `"ExceptionType: message"` when the pass raised, else None.
        duration_ms: wall time of the pass, in ms.
    """

    attempt: int
    prompt: str
    result: Any
    evaluation: SubAgentEvalResult | None
    error: str | None
    duration_ms: float


@dataclass(frozen=True, slots=True)
class SubAgentResult(Generic[ResultT]):
    """The outcome of one `SubAgentTool.run`.

    Attributes:
        name: the tool's name.
        result: the best result (the one last committed to the state).
        evaluation: the best result's verdict, or None without an evaluator.
        refinements: how many refinement passes ran (raised ones included).
        history: every pass, in order.
    """

    name: str
    result: ResultT
    evaluation: SubAgentEvalResult | None
    refinements: int
    history: tuple[RefinementAttempt, ...]

    @property
    def passed(self) -> bool | None:
        """The best result's verdict, or None without an evaluator."""
        return None if self.evaluation is None else self.evaluation.passed


def _better(new: SubAgentEvalResult | None, best: SubAgentEvalResult | None) -> bool:
    if new is None:
        return False
    if best is None:
        return True
    if new.passed != best.passed:
        return new.passed
    new_score = float("-inf") if new.score is None else new.score
    best_score = float("-inf") if best.score is None else best.score
    return new_score > best_score


class SubAgentTool(Generic[StateT, ResultT]):
    """A sub-agent, an executor and a state updater, with optional evaluated refinement.

    Args:
        agent: a `BaseAgent` whose `run(state, **kwargs)` returns a structured output.
        executor: `async (agent_output, state) -> result`, the real-world action.
        state_updater: `(result, state) -> None`, writes the result onto the state.
        evaluator: `(result) -> SubAgentEvalResult`, or None.
        max_refinements: refinement passes allowed after the first (0: none).
        build_refinement_prompt: `(result, original_prompt) -> new_prompt`.
        name: the tool's name; default `agent.agent_name`.

    Raises:
        ValueError: `max_refinements > 0` without both `evaluator` and
            `build_refinement_prompt`, or `max_refinements < 0`.
    """

    def __init__(
        self,
        agent: BaseAgent[Any],
        executor: Callable[[Any, StateT], Awaitable[ResultT]],
        state_updater: Callable[[ResultT, StateT], None],
        *,
        evaluator: Callable[[ResultT], SubAgentEvalResult] | None = None,
        max_refinements: int = 0,
        build_refinement_prompt: Callable[[ResultT, str], str] | None = None,
        name: str | None = None,
    ) -> None:
        if max_refinements < 0:
            raise ValueError(f"max_refinements must be >= 0, got {max_refinements}")
        if max_refinements > 0 and (evaluator is None or build_refinement_prompt is None):
            raise ValueError(
                "SubAgentTool: max_refinements > 0 needs both an evaluator and a "
                "build_refinement_prompt"
            )
        self._agent = agent
        self._executor = executor
        self._state_updater = state_updater
        self._evaluator = evaluator
        self._max_refinements = max_refinements
        self._build = build_refinement_prompt
        self.name = name or agent.agent_name

    async def _pass(self, state: StateT, prompt: str, kwargs: dict[str, Any]) -> ResultT:
        output = await self._agent.run(state, prompt=prompt, **kwargs)
        return await self._executor(output, state)

    async def run(
        self, state: StateT, prompt: str, *, use_enriched: bool = False, **agent_kwargs: Any
    ) -> SubAgentResult[ResultT]:
        """One cycle, then up to `max_refinements` refinements (module docstring).

        Args:
            state: the session state (handed to the agent, executor and state updater).
            prompt: the sub-agent's prompt.
            use_enriched: must be False (metacognition-enriched outputs are not part of this
                implementation).
            **agent_kwargs: forwarded to `agent.run` unchanged.

        Raises:
            ValueError: `use_enriched=True`.
            Exception: whatever the first pass (agent, executor, state updater, evaluator)
                raises; refinement exceptions are caught.
        """
        if use_enriched:
            raise ValueError("use_enriched=True is not supported: enriched outputs do not exist")
        history: list[RefinementAttempt] = []
        start = time.perf_counter()
        result = await self._pass(state, prompt, agent_kwargs)
        self._state_updater(result, state)
        evaluation = self._evaluator(result) if self._evaluator is not None else None
        history.append(RefinementAttempt(0, prompt, result, evaluation, None, _ms(start)))
        best, best_eval = result, evaluation
        latest = result
        refinements = 0
        while (
            refinements < self._max_refinements
            and best_eval is not None
            and not best_eval.passed
            and self._build is not None
            and self._evaluator is not None
        ):
            refinements += 1
            start = time.perf_counter()
            new_prompt = prompt
            try:
                new_prompt = self._build(latest, prompt)
                candidate = await self._pass(state, new_prompt, agent_kwargs)
                verdict = self._evaluator(candidate)
            except Exception as exc:  # noqa: BLE001 (best effort: keep the best prior result)
                history.append(
                    RefinementAttempt(
                        refinements,
                        new_prompt,
                        None,
                        None,
                        f"{type(exc).__name__}: {exc}",
                        _ms(start),
                    )
                )
                break
            history.append(
                RefinementAttempt(refinements, new_prompt, candidate, verdict, None, _ms(start))
            )
            latest = candidate
            if _better(verdict, best_eval):
                best, best_eval = candidate, verdict
                self._state_updater(candidate, state)
        return SubAgentResult(self.name, best, best_eval, refinements, tuple(history))

    def as_tool(self, *, description: str | None = None) -> Tool[Any]:
        """This tool as a pydantic-ai `Tool(prompt: str)`; the calling agent's `deps` is the
        state. It returns `{"name", "result", "passed", "refinements"}` (the result dumped to
        JSON-like data when it is a Pydantic model)."""
        tool = self

        async def call(ctx: RunContext[Any], prompt: str) -> dict[str, Any]:
            outcome = await tool.run(ctx.deps, prompt)
            value: Any = outcome.result
            if isinstance(value, BaseModel):
                value = value.model_dump(mode="json")
            return {
                "name": outcome.name,
                "result": value,
                "passed": outcome.passed,
                "refinements": outcome.refinements,
            }

        call.__name__ = self.name
        return Tool(
            call,
            takes_ctx=True,
            name=self.name,
            description=description or f"Run the {self.name} sub-agent on a prompt.",
        )


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000
