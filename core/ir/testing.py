"""Hypothesis strategies for random *valid* specs, for property tests across the project.

Hypothesis is a test dependency only: it is imported inside the functions, so `import core.ir`
and `import core.ir.testing` work without it.

```python
from hypothesis import given
from core.ir.testing import topology_specs

@given(topology_specs(max_depth=3))
def test_round_trip(spec): ...
```

Every spec drawn satisfies every model rule (routers have a classifier or a condition, route
names are unique, ids are unique) and stays within `SpecLimits()` with the default arguments
(depth <= `max_depth`; a composite has at most `max_children + 1` children (a router's routes
plus its fallback), so at most 1 + 4 + 16 + 64 = 85 nodes with the defaults). Names are drawn from the given pools, so a test can register exactly
those names (`agent_names` in an agent registry, `callable_names` in a callable registry; every
callable is used with one argument except state updaters, which take three, and conditions,
which return a bool).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.ir.ids import assign_ids
from core.ir.models import (
    AgentSpec,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    RefinementLoopSpec,
    RouterSpec,
    RouteSpec,
    StepConfigSpec,
)

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn, SearchStrategy

__all__ = [
    "DEFAULT_AGENT_NAMES",
    "DEFAULT_CALLABLE_NAMES",
    "BUILTIN_MERGES",
    "corrupted_spec_texts",
    "operation_specs",
    "topology_specs",
]

DEFAULT_AGENT_NAMES: tuple[str, ...] = ("solver", "critic", "router_agent")
"""Agent names drawn by default."""
DEFAULT_CALLABLE_NAMES: tuple[str, ...] = ("upper", "strip", "identity")
"""Callable names drawn by default (steps, conditions, classifiers, evaluators, updaters)."""
BUILTIN_MERGES: tuple[str, ...] = ("collect_all", "first_wins", "fastest")
"""The built-in merge names (semantics section 3)."""


def _names_strategy(pool: Sequence[str]) -> SearchStrategy[str]:
    from hypothesis import strategies as st

    return st.sampled_from(list(pool))


def _atomic(
    agent_names: Sequence[str], callable_names: Sequence[str], inline_agents: bool
) -> SearchStrategy[AnyNode]:
    from hypothesis import strategies as st

    agent = st.builds(AgentStepSpec, agent_name=_names_strategy(agent_names))
    function = st.builds(
        FunctionStepSpec,
        callable_name=_names_strategy(callable_names),
        name=st.none() | st.sampled_from(["fn", "step b"]),
    )
    options: list[SearchStrategy[AnyNode]] = [agent, function]
    if inline_agents:
        options.append(st.builds(AgentStepSpec, inline_spec=_agent_specs()))
    return st.one_of(options)


def _agent_specs(output: str = "text") -> SearchStrategy[AgentSpec]:
    from hypothesis import strategies as st

    schemas: dict[str, dict[str, Any]] = {
        "text": {"type": "string"},
        "route": {"type": "string"},
        "eval": {
            "type": "object",
            "properties": {"passed": {"type": "boolean"}, "feedback": {"type": "string"}},
            "required": ["passed"],
        },
    }
    return st.builds(
        AgentSpec,
        name=st.sampled_from(["inline_a", "inline_b"]),
        system_prompt=st.text(max_size=20),
        output_schema=st.just(schemas[output]),
        model=st.none() | st.sampled_from(["test:model", "openai:gpt-4o-mini"]),
        constraints=st.lists(st.text(max_size=10), max_size=2),
    )


def _composites(
    children: SearchStrategy[AnyNode],
    *,
    max_children: int,
    agent_names: Sequence[str],
    callable_names: Sequence[str],
    merge_names: Sequence[str],
    inline_agents: bool,
) -> SearchStrategy[AnyNode]:
    from hypothesis import strategies as st

    names = st.sampled_from(["main", "stage", "step 2", "ünïcode"])
    config = st.none() | st.builds(
        StepConfigSpec,
        name=st.sampled_from(["", "s"]),
        on_error=st.sampled_from(["stop", "skip", "retry"]),
        max_retries=st.integers(0, 3),
    )
    entries = st.lists(
        st.builds(PipelineStepEntry, operation=children, config=config),
        min_size=1,
        max_size=max_children,
    )
    pipeline = st.builds(PipelineSpec, steps=entries, name=st.just("pipeline") | names)
    parallel = st.builds(
        ParallelSpec,
        steps=st.lists(children, min_size=1, max_size=max_children),
        merge=st.sampled_from(list(merge_names)),
        timeout=st.none() | st.floats(0.01, 60.0),
        name=st.just("parallel") | names,
    )
    agent_or_callable = [*agent_names, *callable_names]
    ref: SearchStrategy[AgentSpec | str] = st.sampled_from(agent_or_callable)
    route_ref: SearchStrategy[AgentSpec | str] = ref
    eval_ref: SearchStrategy[AgentSpec | str] = ref
    if inline_agents:
        route_ref = ref | _agent_specs("route")
        eval_ref = ref | _agent_specs("eval")

    @st.composite
    def router(draw: DrawFn) -> AnyNode:
        n = draw(st.integers(1, max_children))
        route_names = draw(
            st.lists(
                st.sampled_from(["math", "code", "chat", "other", "r5", "Ω"]),
                min_size=n,
                max_size=n,
                unique=True,
            )
        )
        classifier = draw(st.none() | route_ref)
        routes: list[RouteSpec] = []
        for i, route_name in enumerate(route_names):
            condition = draw(st.none() | _names_strategy(callable_names))
            if classifier is None and i == 0 and condition is None:
                condition = callable_names[0]
            routes.append(RouteSpec(name=route_name, step=draw(children), condition_name=condition))
        fallback = draw(st.none() | children)
        return RouterSpec(
            routes=routes,
            classifier=classifier,
            fallback_step=fallback,
            name=draw(st.just("router") | names),
        )

    loop = st.builds(
        RefinementLoopSpec,
        step=children,
        evaluator=eval_ref,
        state_updater_name=_names_strategy(callable_names),
        max_iterations=st.integers(1, 6),
        timeout=st.none() | st.floats(0.01, 60.0),
        convergence_window=st.none() | st.integers(1, 4),
        convergence_threshold=st.floats(0.0, 1.0),
        confidence_threshold=st.none() | st.floats(0.0, 1.0),
        keep_best=st.booleans(),
        name=st.just("refinement_loop") | names,
    )
    return st.one_of(pipeline, parallel, router(), loop)


def _levels(
    *,
    max_depth: int,
    max_children: int,
    agent_names: Sequence[str],
    callable_names: Sequence[str],
    merge_names: Sequence[str],
    inline_agents: bool,
) -> tuple[SearchStrategy[AnyNode], SearchStrategy[AnyNode]]:
    """(any node of depth <= max_depth, composite of depth <= max_depth)."""
    from hypothesis import strategies as st

    if max_depth < 1:
        raise ValueError("max_depth must be >= 1")
    atomic = _atomic(agent_names, callable_names, inline_agents)
    below: SearchStrategy[AnyNode] = atomic
    composite: SearchStrategy[AnyNode] = atomic
    for _ in range(max_depth):
        composite = _composites(
            below,
            max_children=max_children,
            agent_names=agent_names,
            callable_names=callable_names,
            merge_names=merge_names,
            inline_agents=inline_agents,
        )
        below = st.one_of(atomic, composite)
    return below, composite


def _with_ids(strategy: SearchStrategy[AnyNode], ids: str) -> SearchStrategy[AnyNode]:
    from hypothesis import strategies as st

    if ids == "none":
        return strategy
    if ids == "all":
        return strategy.map(assign_ids)
    return st.one_of(strategy, strategy.map(assign_ids))


def operation_specs(
    *,
    max_depth: int = 3,
    max_children: int = 3,
    agent_names: Sequence[str] = DEFAULT_AGENT_NAMES,
    callable_names: Sequence[str] = DEFAULT_CALLABLE_NAMES,
    merge_names: Sequence[str] = BUILTIN_MERGES,
    inline_agents: bool = False,
    ids: str = "maybe",
) -> SearchStrategy[AnyNode]:
    """Random valid nodes of any kind (atomic or composite), depth <= `max_depth`.

    Args:
        max_depth: the largest section-6 depth drawn (>= 1).
        max_children: most steps / branches / routes per composite.
        agent_names: the agent names used (agent steps, string classifiers and evaluators).
        callable_names: the callable names used (function steps, conditions, updaters, string
            classifiers and evaluators); must not be empty.
        merge_names: the parallel merge names used.
        inline_agents: also draw inline `AgentSpec`s.
        ids: `"none"` (no ids), `"all"` (`assign_ids` on every spec) or `"maybe"` (either).
    """
    any_node, _ = _levels(
        max_depth=max_depth,
        max_children=max_children,
        agent_names=agent_names,
        callable_names=callable_names,
        merge_names=merge_names,
        inline_agents=inline_agents,
    )
    return _with_ids(any_node, ids)


def topology_specs(
    *,
    max_depth: int = 3,
    max_children: int = 3,
    agent_names: Sequence[str] = DEFAULT_AGENT_NAMES,
    callable_names: Sequence[str] = DEFAULT_CALLABLE_NAMES,
    merge_names: Sequence[str] = BUILTIN_MERGES,
    inline_agents: bool = False,
    ids: str = "maybe",
) -> SearchStrategy[AnyNode]:
    """Random valid whole topologies (a composite root), depth between 1 and `max_depth`.

    Same arguments as `operation_specs`. The values are `TopologySpec`s (typed as the node
    union for the type checker).
    """
    _, composite = _levels(
        max_depth=max_depth,
        max_children=max_children,
        agent_names=agent_names,
        callable_names=callable_names,
        merge_names=merge_names,
        inline_agents=inline_agents,
    )
    return _with_ids(composite, ids)


def corrupted_spec_texts(**kwargs: Any) -> SearchStrategy[str]:
    """Random JSON-ish texts near valid specs: a valid spec's JSON with random edits (cut,
    inserted characters or brackets, a changed kind, a deleted key), or arbitrary text.

    Keyword arguments go to `topology_specs`. Useful to check that a parser only ever raises
    `SpecError`.
    """
    from hypothesis import strategies as st

    @st.composite
    def corrupt(draw: DrawFn) -> str:
        spec = draw(topology_specs(**kwargs))
        text = spec.model_dump_json(exclude_defaults=draw(st.booleans()))
        for _ in range(draw(st.integers(1, 4))):
            edit = draw(st.sampled_from(["cut", "insert", "kind", "brackets", "dup"]))
            pos = draw(st.integers(0, len(text)))
            if edit == "cut":
                end = draw(st.integers(pos, min(len(text), pos + 20)))
                text = text[:pos] + text[end:]
            elif edit == "insert":
                text = text[:pos] + draw(st.text(max_size=5)) + text[pos:]
            elif edit == "kind":
                text = text.replace(
                    '"kind":"' + draw(st.sampled_from(["pipeline", "agent_step", "router"])),
                    '"kind":"'
                    + draw(st.sampled_from(["agnet", "", "pipeline", "refinement_loop"])),
                    1,
                )
            elif edit == "brackets":
                text = (
                    text[:pos]
                    + draw(st.sampled_from(["[", "{", "]", "}", "[[[[", '"']))
                    + text[pos:]
                )
            else:
                text = text[:pos] + text[pos : pos + 30] + text[pos:]
        return text

    return st.one_of(corrupt(), st.text(max_size=50))
