"""What counts as an agent: a pydantic-ai agent, or an object that quacks like one."""

from __future__ import annotations

import inspect
from typing import Any, Protocol, runtime_checkable

from pydantic_ai.agent import AbstractAgent

__all__ = ["AgentLike", "is_agent"]


@runtime_checkable
class AgentLike(Protocol):
    """The part of a pydantic-ai agent the runtime uses.

    `run(prompt, *, usage=RunUsage())` must be a coroutine function that adds every model
    request's usage into `usage` in place (also when it raises) and returns an object with
    `.output`. `model` is the configured model (a pydantic-ai `Model`, a `"provider:model"`
    string, or None), used only to name the model in recorded usage.
    """

    @property
    def model(self) -> Any: ...

    async def run(self, user_prompt: Any, /, **kwargs: Any) -> Any: ...


def is_agent(obj: object) -> bool:
    """Whether `obj` is treated as an agent by `coerce_step`, routers and loops.

    The rule: any pydantic-ai `AbstractAgent` (`Agent`, wrapper agents); otherwise an object
    (not a class, not a function) that has a `model` attribute and a coroutine-function `run`
    method, i.e. that quacks like `pydantic_ai.Agent` (see `AgentLike`). Objects that are
    runtime steps (have `step_name` and `execute`) are never agents: check for a step first.
    """
    if isinstance(obj, AbstractAgent):
        return True
    if isinstance(obj, type) or inspect.isroutine(obj):
        return False
    run = getattr(obj, "run", None)
    return hasattr(obj, "model") and run is not None and inspect.iscoroutinefunction(run)
