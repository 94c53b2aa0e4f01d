"""How a loaded problem gets the standard library (`core.problems.load_problem` calls this)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import wraps
from typing import Any

from core.combinators.ballot import Answer, Normalization, plain_value
from core.combinators.hooks import BallotHooks
from core.combinators.library import CombinatorEntry, Library, standard_library
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir.dataflow import EffectTable

__all__ = ["LibraryWiring", "adapt_own_callable", "wire_standard_library"]


@dataclass(frozen=True, slots=True)
class LibraryWiring:
    """A problem's registries, roles and effects with the standard library added.

    Attributes:
        callable_registry: the problem's callables (adapted to ballots when `hooks` is set),
            then the library's entries.
        roles: role -> names, the problem's own first.
        effects: the problem's effects and the entries'.
        hooks: the hydration hooks (ballots), or None for a problem with its own state.
        library: the entries that were added.
    """

    callable_registry: CallableRegistry
    roles: dict[str, list[str]]
    effects: EffectTable
    hooks: BallotHooks | None
    library: Library


def adapt_own_callable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` receiving `plain_value` of each argument (a ballot's current output, or its input
    before any candidate) instead of ballots, so a problem's own functions keep the values
    they were written for."""
    if inspect.iscoroutinefunction(fn):

        @wraps(fn)
        async def adapted_async(*args: Any) -> Any:
            return await fn(*(plain_value(a) for a in args))

        return adapted_async

    @wraps(fn)
    def adapted(*args: Any) -> Any:
        return fn(*(plain_value(a) for a in args))

    return adapted


def wire_standard_library(
    *,
    callables: CallableRegistry,
    agents: AgentRegistry,
    roles: Mapping[str, Sequence[str]],
    effects: EffectTable,
    inputs: Sequence[Any],
    answer_field: str | None = None,
    normalization: Normalization = "text",
    answer_of: Callable[[Any], Any] | None = None,
    normalize_answer: Callable[[str], str] | None = None,
    input_text: Callable[[Any], str] | None = None,
    judges: Sequence[str] | None = None,
    extra: Sequence[CombinatorEntry] = (),
    sampled: bool = True,
) -> LibraryWiring:
    """The problem's parts with the standard library added (`core.combinators` docstring).

    A problem that declares no effects passes ballots: its agent steps are wrapped
    (`BallotHooks`), its own callables adapted (`adapt_own_callable`) and every entry added. A
    problem with effects of its own has its own state: only the input features are added, and
    only when it gives `input_text`; its registries are left as they are. `extra` entries
    (e.g. learned conditions) join the library after the standard ones. `sampled`: whether
    repeated identical calls of one agent may answer differently (False for replayed agents,
    whose recorded output is the same on every call: a self-consistency vote of one would
    cost k calls for the single agent's answer), so `EffectTable.sampled_agents` is set only
    then.
    """
    answer = Answer(answer_field, normalization, answer_of=answer_of, normalize=normalize_answer)
    ballots = not effects.names
    library = standard_library(
        answer,
        agents=agents,
        inputs=inputs,
        ballots=ballots,
        text_of=input_text,
        judges=judges,
        extra=extra,
    )
    registry = callables
    if ballots and callables.names():
        registry = CallableRegistry()
        for name, fn in callables.items():
            registry.register(name, adapt_own_callable(fn), callables.describe(name))
    elif library and not ballots:
        registry = CallableRegistry()
        for name, fn in callables.items():
            registry.register(name, fn, callables.describe(name))
    merged_roles, merged = library.register_into(registry, roles, effects.names)
    table = EffectTable(
        names=merged,
        # a problem with no step of its own answers only through agents (the library's steps
        # only choose among candidates); one with its own steps may answer through them
        answer_needs_agent=effects.answer_needs_agent or (ballots and not roles.get("step")),
        sampled_agents=effects.sampled_agents or (ballots and sampled),
    )
    return LibraryWiring(
        callable_registry=registry,
        roles=merged_roles,
        effects=table,
        hooks=BallotHooks(answer) if ballots else None,
        library=library,
    )
