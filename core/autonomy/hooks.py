"""Hooks at the subtask boundary (runtime contract, decision 4) and metacognition's config.

Before each subtask runs, the orchestrator asks its `HookRunner`; every hook sees the subtask
and a read-only view of the solve so far, and returns a `HookDecision`:

- `Continue()`: run the subtask normally (also what a runner without hooks answers);
- `Skip(stub_result)`: do not run it; the stub is its (successful) output;
- `Redirect(new_args, new_tool)`: run it with extra prompt arguments, and/or on the agent named
  `new_tool`, one this solve spawned or took from the roster earlier (an unknown name is an
  error result for the subtask);
- `Abort(reason)`: stop the whole solve; `solve` raises `HookAbortError(reason, subtask=...)`.

A hook that raises stops the solve too: `solve` raises `HookError` naming the hook and the
subtask (the hook's exception as its cause, the results finished before it in
`partial_results`).

Hooks run in order and the first decision that is not `Continue` wins. Each decision is
recorded in the `ExecutionResult` (`hook_decisions`) and published as `hook.decision`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.errors import HookError

__all__ = [
    "Abort",
    "Continue",
    "Hook",
    "HookContext",
    "HookDecision",
    "HookRunner",
    "MetacognitionConfig",
    "Redirect",
    "Skip",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class Continue(BaseModel):
    """Run the subtask normally."""

    model_config = _CONFIG
    kind: Literal["continue"] = "continue"
    """Discriminator."""


class Skip(BaseModel):
    """Do not run the subtask; use `stub_result` as its output."""

    model_config = _CONFIG
    kind: Literal["skip"] = "skip"
    """Discriminator."""
    stub_result: Any = None
    """The output recorded for the skipped subtask."""


class Redirect(BaseModel):
    """Run the subtask with rewritten arguments and/or on another agent."""

    model_config = _CONFIG
    kind: Literal["redirect"] = "redirect"
    """Discriminator."""
    new_args: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Extra keyword arguments for the agent's prompt (they override the defaults)."""
    new_tool: str | None = None
    """The name of an agent of this solve to run instead; None = the subtask's own agent."""


class Abort(BaseModel):
    """Stop the whole solve with `HookAbortError`."""

    model_config = _CONFIG
    kind: Literal["abort"] = "abort"
    """Discriminator."""
    reason: str
    """Why (carried by the error and recorded)."""


HookDecision = Continue | Skip | Redirect | Abort
"""What a hook answers at a subtask boundary."""


class HookContext(BaseModel):
    """What a hook sees of the solve (a snapshot)."""

    model_config = _CONFIG

    goal: str
    """The solve's goal."""
    depth: int
    """The subtask's spawn depth (1 for the planner's own subtasks)."""
    completed: tuple[str, ...]
    """Names of the subtasks finished so far, in order."""
    outputs: Mapping[str, Any]
    """Their outputs, by name."""


Hook = Callable[[Any, HookContext], HookDecision | Awaitable[HookDecision]]
"""A hook: `(subtask, context) -> HookDecision`, sync or async."""


class HookRunner:
    """Runs hooks in order at each subtask boundary; the first non-`Continue` decision wins.

    Args:
        hooks: the hooks.
    """

    def __init__(self, hooks: Sequence[Hook] = ()) -> None:
        self.hooks = list(hooks)

    def add(self, hook: Hook) -> None:
        """Append a hook."""
        self.hooks.append(hook)

    async def decide(self, subtask: Any, context: HookContext) -> HookDecision:
        """The decision for `subtask`.

        Raises:
            HookError: a hook raised (naming the hook and the subtask; the hook's exception
                is the cause).
            TypeError: a hook returned something that is not a `HookDecision`.
        """
        for hook in self.hooks:
            try:
                decision: Any = hook(subtask, context)
                if inspect.isawaitable(decision):
                    decision = await decision
            except Exception as exc:
                name = getattr(hook, "__name__", None) or type(hook).__name__
                raise HookError(
                    str(name), subtask=str(getattr(subtask, "name", subtask)), error=exc
                ) from exc
            if not isinstance(decision, Continue | Skip | Redirect | Abort):
                raise TypeError(
                    f"a hook must return Continue, Skip, Redirect or Abort, got "
                    f"{type(decision).__name__}"
                )
            if not isinstance(decision, Continue):
                return decision
        return Continue()


class MetacognitionConfig(BaseModel):
    """Confidence-driven re-decomposition.

    After each successful subtask whose output carries a `confidence` (an attribute or a key,
    a number), a confidence below `redecompose_threshold` makes the planner rewrite the
    remaining subtasks, at most `max_redecompositions` times per solve.
    """

    model_config = _CONFIG

    redecompose_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    """Below this confidence, re-decompose."""
    max_redecompositions: int = Field(default=2, ge=0)
    """The most re-decompositions in one solve."""
