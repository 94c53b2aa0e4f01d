"""Hydration: from a validated spec to runtime objects, through registries only (section 7).

Kept whole: one builder per kind over one name resolution; a kind's build and its name check
change together, and the trust boundary is easier to audit in one file.

A spec can reach nothing but registered names: there is no `eval`, `exec` or import of anything
a spec carries. Two registries hold what a spec may name:

- `CallableRegistry`: name -> callable (function steps, route conditions, state updaters,
  custom parallel merges, callable classifiers and evaluators);
- `AgentRegistry`: name -> zero-argument factory returning an agent (agent steps, agent
  classifiers and evaluators). Every place that names an agent gets its own agent from the
  factory.

Name resolution (and the `kind` each unknown name is reported with):

| spec field                          | looked up in                                | kind                  |
|-------------------------------------|---------------------------------------------|-----------------------|
| `agent_step.agent_name`             | agent registry                              | `agent`               |
| `function_step.callable_name`       | callable registry                           | `callable`            |
| `route.condition_name`              | callable registry                           | `callable`            |
| `refinement_loop.state_updater_name`| callable registry                           | `callable`            |
| `parallel.merge`                    | built-ins (`collect_all`, `first_wins`, `fastest`), then callable registry | `merge` |
| `router.classifier` (a string)      | agent registry, then callable registry      | `agent_or_callable`   |
| `refinement_loop.evaluator` (str)   | agent registry, then callable registry      | `agent_or_callable`   |

Before anything is built, every unknown name is collected with its JSON path and kind, in
document order, and reported in one `UnknownNamesError` (F4), which also lists the known names
per kind so a designer's debug retry can pick valid ones. Inline `AgentSpec`s (in agent steps,
classifiers, evaluators) are refused with a `HydrationError` naming their paths unless the caller
passes `allow_inline_agents=True` and an `agent_factory`.

Every function that takes a registry also takes a plain mapping (`{"cot": make_cot}`: name ->
zero-argument agent factory, or name -> callable), converted with `as_agent_registry` /
`as_callable_registry`, so code written against dict registries runs unchanged.
`pipeline_from_spec`, `parallel_from_spec`, `router_from_spec` and `refinement_loop_from_spec`
are `topology_from_spec` for one composite kind, refusing another kind with a `TypeError`.

Each spec node becomes one runtime step that carries the node's `id` as `node_id` (so trace spans
point back at the spec); composites nest as steps (a `Parallel` in a step position yields its
merged value, a loop its output).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, cast, runtime_checkable

from core.agents import is_agent, render_prompt
from core.agents.overrides import override_system_prompt, parse_prompt_target
from core.errors import HydrationError, UnknownNamesError
from core.ir.models import (
    AgentSpec,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    RefinementLoopSpec,
    RouterSpec,
    child_slots,
    walk,
)
from core.runtime import (
    AgentStep,
    ErrorStrategy,
    FunctionStep,
    MergeStrategy,
    Parallel,
    Pipeline,
    RefinementLoop,
    Route,
    Router,
    Step,
    StepConfig,
)

__all__ = [
    "BUILTIN_MERGES",
    "AgentRegistry",
    "AgentRegistryLike",
    "CallableRegistry",
    "CallableRegistryLike",
    "HydrationHooks",
    "InlineAgentFactory",
    "agents_in",
    "as_agent_registry",
    "as_callable_registry",
    "parallel_from_spec",
    "pipeline_from_spec",
    "refinement_loop_from_spec",
    "router_from_spec",
    "topology_from_spec",
    "validate_names",
]

BUILTIN_MERGES: tuple[str, ...] = tuple(m.value for m in MergeStrategy)
"""The merge names that need no registration: `collect_all`, `first_wins`, `fastest`."""

AgentFactory = Callable[[], Any]
"""A zero-argument callable returning an agent (a pydantic-ai agent or an `AgentLike`).

Not exported from `core`: there `AgentFactory` is the autonomy layer's spec-to-agent factory."""


@runtime_checkable
class _AgentSpawner(Protocol):
    """Builds an agent from an `AgentSpec` with `spawn(spec)`: the autonomy layer's
    `AgentFactory`, the reference library's inline-agent factory."""

    def spawn(self, spec: AgentSpec) -> Any: ...


InlineAgentFactory: TypeAlias = "Callable[[AgentSpec], Any] | _AgentSpawner"
"""Turns an inline `AgentSpec` into an agent (supplied by the caller that allows inline agents):
a callable `spec -> agent`, or an object with `spawn(spec)` such as `core.AgentFactory`."""


def _spawn_fn(factory: InlineAgentFactory | None) -> Callable[[AgentSpec], Any] | None:
    """The inline-agent factory as a callable (an `AgentFactory`'s `spawn`)."""
    if isinstance(factory, _AgentSpawner) and not callable(factory):
        return factory.spawn
    return factory


@runtime_checkable
class HydrationHooks(Protocol):
    """What a problem may change in how a spec is built (passed at construction, e.g.
    `core.combinators.BallotHooks`): each agent step of an `agent_step` node, and the root."""

    def agent_step(self, step: AgentStep) -> Step:
        """The step an `agent_step` node runs as (`step` itself, or a wrapper of it)."""
        ...

    def root(self, step: Step) -> Step:
        """The step the whole topology runs as."""
        ...

    def agent_input(self, value: Any) -> Any:
        """What an agent classifier or loop evaluator is prompted with, given its input."""
        ...


_V = TypeVar("_V")


def _first_doc_line(obj: object) -> str | None:
    doc = inspect.getdoc(obj)
    if not doc:
        return None
    line = doc.strip().splitlines()[0].strip()
    return line or None


class _Registry(Generic[_V]):
    """Name -> value, with descriptions (what the meta agent is shown). Re-registering replaces."""

    _what = "entry"

    def __init__(self) -> None:
        self._values: dict[str, _V] = {}
        self._descriptions: dict[str, str | None] = {}

    def _check_name(self, name: object) -> str:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a {self._what} name must be a non-empty string, got {name!r}")
        return name

    def _store(self, name: str, value: _V, description: str | None) -> None:
        self._values[name] = value
        self._descriptions[name] = description

    def _missing(self, name: str) -> KeyError:
        known = ", ".join(self.names()) or "(none)"
        return KeyError(f"unknown {self._what} {name!r}; registered: {known}")

    def _get(self, name: str) -> _V:
        try:
            return self._values[name]
        except KeyError:
            raise self._missing(name) from None

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._values)

    def describe(self, name: str) -> str | None:
        """The description registered with `name` (None if it has none).

        Raises:
            KeyError: `name` is not registered (the message lists the registered names).
        """
        if name not in self._values:
            raise self._missing(name)
        return self._descriptions[name]

    def items(self) -> list[tuple[str, _V]]:
        """`(name, value)` pairs, sorted by name."""
        return [(name, self._values[name]) for name in self.names()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.names()!r})"


class CallableRegistry(_Registry[Callable[..., Any]]):
    """Registered callables a spec may name (function steps, conditions, updaters, merges,
    classifiers, evaluators).

    Example:
        ```python
        calls = CallableRegistry()
        calls.register("upper", str.upper, "Upper-cases the text.")
        calls.get("upper")("a")  # "A"
        ```
    """

    _what = "callable"

    def __init__(self) -> None:
        super().__init__()
        self.input_text: Callable[[Any], str] | None = None
        """The problem's reader of the question text of a topology's state (set by the problem
        loader, `core.problems`); learned conditions fit and route on what it returns
        (`core.combinators.learned`). None: `core.combinators.ballot.input_text`."""

    def register(self, name: str, fn: Callable[..., Any], description: str | None = None) -> None:
        """Register `fn` under `name` (replacing any earlier entry of that name).

        Args:
            name: a non-empty string (not only whitespace).
            fn: any callable, sync or async.
            description: what the designer is told it does; default the first line of `fn`'s
                docstring, if any.

        Raises:
            ValueError: `name` is not a non-empty string.
            TypeError: `fn` is not callable.
        """
        checked = self._check_name(name)
        if not callable(fn):
            raise TypeError(f"callable {checked!r}: expected a callable, got {type(fn).__name__}")
        self._store(checked, fn, description if description is not None else _first_doc_line(fn))

    def get(self, name: str) -> Callable[..., Any]:
        """The callable registered as `name`.

        Raises:
            KeyError: not registered (the message lists the registered names).
        """
        return self._get(name)


class AgentRegistry(_Registry[AgentFactory]):
    """Registered agents a spec may name, as zero-argument factories.

    `create(name)` calls the factory, so each place in a topology that names an agent gets its
    own agent object. An agent instance may be registered directly: it is wrapped in a factory
    returning that instance (pydantic-ai agents keep no state between runs).
    """

    _what = "agent"

    def register(
        self, name: str, factory: AgentFactory | Any, description: str | None = None
    ) -> None:
        """Register an agent factory (or an agent instance) under `name`, replacing any earlier.

        Args:
            name: a non-empty string (not only whitespace).
            factory: a zero-argument callable returning an agent, or an agent.
            description: what the designer is told the agent does; default the first line of
                the factory's docstring, if any.

        Raises:
            ValueError: `name` is not a non-empty string.
            TypeError: `factory` is neither callable nor an agent.
        """
        checked = self._check_name(name)
        if is_agent(factory) and not callable(factory):
            agent = factory

            def same_agent() -> Any:
                return agent

            self._store(checked, same_agent, description)
            return
        if not callable(factory):
            raise TypeError(
                f"agent {checked!r}: expected a zero-argument factory or an agent, "
                f"got {type(factory).__name__}"
            )
        described = description if description is not None else _first_doc_line(factory)
        self._store(checked, factory, described)

    def get(self, name: str) -> AgentFactory:
        """The factory registered as `name`.

        Raises:
            KeyError: not registered (the message lists the registered names).
        """
        return self._get(name)

    def create(self, name: str) -> Any:
        """A new agent from the factory registered as `name`.

        Raises:
            KeyError: not registered (the message lists the registered names).
        """
        return self._get(name)()


AgentRegistryLike: TypeAlias = "AgentRegistry | Mapping[str, AgentFactory]"
"""An `AgentRegistry`, or a mapping of agent name -> zero-argument factory (or agent)."""
CallableRegistryLike: TypeAlias = "CallableRegistry | Mapping[str, Callable[..., Any]]"
"""A `CallableRegistry`, or a mapping of name -> callable."""


def as_agent_registry(registry: AgentRegistryLike) -> AgentRegistry:
    """`registry` itself when it is an `AgentRegistry`, else a new one holding its entries.

    Args:
        registry: an `AgentRegistry`, or any mapping of name -> zero-argument factory (an agent
            instance is accepted too, as by `AgentRegistry.register`).

    Raises:
        TypeError: `registry` is neither, or an entry is neither callable nor an agent.
        ValueError: a name is not a non-empty string.
    """
    if isinstance(registry, AgentRegistry):
        return registry
    if not isinstance(cast(object, registry), Mapping):  # untyped callers pass anything
        raise TypeError(
            "agent_registry: expected an AgentRegistry or a mapping of name -> factory, "
            f"got {type(registry).__name__}"
        )
    converted = AgentRegistry()
    for name, factory in registry.items():
        converted.register(name, factory)
    return converted


def as_callable_registry(registry: CallableRegistryLike) -> CallableRegistry:
    """`registry` itself when it is a `CallableRegistry`, else a new one holding its entries.

    Args:
        registry: a `CallableRegistry`, or any mapping of name -> callable.

    Raises:
        TypeError: `registry` is neither, or an entry is not callable.
        ValueError: a name is not a non-empty string.
    """
    if isinstance(registry, CallableRegistry):
        return registry
    if not isinstance(cast(object, registry), Mapping):  # untyped callers pass anything
        raise TypeError(
            "callable_registry: expected a CallableRegistry or a mapping of name -> callable, "
            f"got {type(registry).__name__}"
        )
    converted = CallableRegistry()
    for name, fn in registry.items():
        converted.register(name, fn)
    return converted


# --- name checks -------------------------------------------------------------------------------

# A reference to check: (json path, kind, name). Kinds are listed in the module docstring.
_Ref = tuple[str, str, str]


def _references(spec: AnyNode) -> Iterator[tuple[str, str, str | AgentSpec]]:
    """Every name or inline agent a spec refers to, in document order (JSON field order)."""
    # stack of pending items: ("node", path, node) or ("ref", path, kind, value)
    stack: list[tuple[Any, ...]] = [("node", "$", spec)]
    while stack:
        item = stack.pop()
        if item[0] == "ref":
            yield item[1], item[2], item[3]
            continue
        path: str = item[1]
        node: AnyNode = item[2]
        todo: list[tuple[Any, ...]] = []
        if isinstance(node, AgentStepSpec):
            if node.agent_name is not None:
                todo.append(("ref", f"{path}.agent_name", "agent", node.agent_name))
            if node.inline_spec is not None:
                todo.append(("ref", f"{path}.inline_spec", "inline", node.inline_spec))
        elif isinstance(node, FunctionStepSpec):
            todo.append(("ref", f"{path}.callable_name", "callable", node.callable_name))
        elif isinstance(node, PipelineSpec):
            todo.extend(("node", path + s, c) for s, c in child_slots(node))
        elif isinstance(node, ParallelSpec):
            todo.extend(("node", path + s, c) for s, c in child_slots(node))
            todo.append(("ref", f"{path}.merge", "merge", node.merge))
        elif isinstance(node, RouterSpec):
            for i, route in enumerate(node.routes):
                todo.append(("node", f"{path}.routes[{i}].step", route.step))
                if route.condition_name is not None:
                    todo.append(
                        (
                            "ref",
                            f"{path}.routes[{i}].condition_name",
                            "callable",
                            route.condition_name,
                        )
                    )
            if node.classifier is not None:
                kind = "inline" if isinstance(node.classifier, AgentSpec) else "agent_or_callable"
                todo.append(("ref", f"{path}.classifier", kind, node.classifier))
            if node.fallback_step is not None:
                todo.append(("node", f"{path}.fallback_step", node.fallback_step))
        else:
            todo.append(("node", f"{path}.step", node.step))
            kind = "inline" if isinstance(node.evaluator, AgentSpec) else "agent_or_callable"
            todo.append(("ref", f"{path}.evaluator", kind, node.evaluator))
            todo.append(("ref", f"{path}.state_updater_name", "callable", node.state_updater_name))
        stack.extend(reversed(todo))


def _known(name: str, kind: str, calls: CallableRegistry, agents: AgentRegistry) -> bool:
    if kind == "agent":
        return name in agents
    if kind == "callable":
        return name in calls
    if kind == "merge":
        return name in BUILTIN_MERGES or name in calls
    return name in agents or name in calls  # agent_or_callable


def validate_names(
    spec: AnyNode,
    *,
    callable_registry: CallableRegistryLike,
    agent_registry: AgentRegistryLike,
) -> list[tuple[str, str, str]]:
    """Every name in `spec` no registry resolves, without building anything.

    The registries may be plain mappings (see `as_agent_registry`).

    Returns:
        `(json_path, kind, name)` per unknown name, in document order, e.g.
        `[("$.routes[1].step.agent_name", "agent", "solver_x"),
        ("$.steps[0].operation.state_updater_name", "callable", "refine")]`. Kinds: `agent`,
        `callable`, `merge`, `agent_or_callable` (see the module docstring). Empty when every
        name resolves. Inline agents are not names and are not reported here.
    """
    callable_registry = as_callable_registry(callable_registry)
    agent_registry = as_agent_registry(agent_registry)
    return _unknown(_references(spec), callable_registry, agent_registry)


def _unknown(
    refs: Iterable[tuple[str, str, str | AgentSpec]], calls: CallableRegistry, agents: AgentRegistry
) -> list[tuple[str, str, str]]:
    unknown: list[tuple[str, str, str]] = []
    for path, kind, value in refs:
        if kind == "inline" or not isinstance(value, str):
            continue
        if not _known(value, kind, calls, agents):
            unknown.append((path, kind, value))
    return unknown


def _known_names(calls: CallableRegistry, agents: AgentRegistry) -> dict[str, list[str]]:
    return {"agent": agents.names(), "callable": calls.names(), "merge": list(BUILTIN_MERGES)}


# --- building -----------------------------------------------------------------------------------


class _Builder:
    """Builds runtime objects for one spec; every failure names the node's JSON path."""

    def __init__(
        self,
        calls: CallableRegistry,
        agents: AgentRegistry,
        agent_factory: Callable[[AgentSpec], Any] | None,
        prompts: Mapping[str, str] | None = None,
        hooks: HydrationHooks | None = None,
    ) -> None:
        self.calls = calls
        self.agents = agents
        self.agent_factory = agent_factory
        self.prompts: Mapping[str, str] = prompts or {}
        self.hooks = hooks

    def agent(self, ref: str | AgentSpec, path: str) -> Any:
        if isinstance(ref, AgentSpec):
            if self.agent_factory is None:  # pragma: no cover - refused before building
                raise HydrationError(f"{path}: inline agents need an agent_factory")
            where, make = f"the agent factory for the inline agent at {path}", self.agent_factory
            if ref.name in self.prompts:
                ref = ref.model_copy(update={"system_prompt": self.prompts[ref.name]})
            try:
                agent = make(ref)
            except Exception as exc:
                raise HydrationError(f"{where} raised {type(exc).__name__}: {exc}") from exc
        else:
            where = f"the factory of agent {ref!r} (at {path})"
            try:
                agent = self.agents.create(ref)
            except Exception as exc:
                raise HydrationError(f"{where} raised {type(exc).__name__}: {exc}") from exc
            if is_agent(agent) and ref in self.prompts:
                try:
                    agent = override_system_prompt(agent, self.prompts[ref])
                except TypeError as exc:
                    raise HydrationError(f"prompt override of agent {ref!r}: {exc}") from exc
        if not is_agent(agent):
            raise HydrationError(f"{where} returned a {type(agent).__name__}, not an agent")
        return agent

    def agent_or_callable(self, ref: str | AgentSpec, path: str, step_name: str) -> Any:
        if isinstance(ref, AgentSpec) or ref in self.agents:
            agent = self.agent(ref, path)
            if self.hooks is None:
                return agent
            # the name the router or loop would give it (`coerce_step(..., name=step_name)`)
            hooks = self.hooks
            return AgentStep(
                agent, lambda value: render_prompt(hooks.agent_input(value)), name=step_name
            )
        return self.calls.get(ref)

    def node(self, node: AnyNode, path: str, children: list[Step]) -> Step:
        if isinstance(node, AgentStepSpec):
            ref: str | AgentSpec = (
                node.agent_name if node.agent_name is not None else _inline(node.inline_spec)
            )
            name = node.agent_name or (node.inline_spec.name if node.inline_spec else None)
            step = AgentStep(self.agent(ref, f"{path}.{_field(node)}"), name=name, node_id=node.id)
            return step if self.hooks is None else self.hooks.agent_step(step)
        if isinstance(node, FunctionStepSpec):
            fn = self.calls.get(node.callable_name)
            return FunctionStep(fn, node.name or node.callable_name, node_id=node.id)
        if isinstance(node, PipelineSpec):
            entries: list[Any] = []
            for entry, child in zip(node.steps, children, strict=True):
                if entry.config is None:
                    entries.append(child)
                else:
                    cfg = StepConfig(
                        name=entry.config.name,
                        on_error=ErrorStrategy(entry.config.on_error),
                        max_retries=entry.config.max_retries,
                    )
                    entries.append((child, cfg))
            return Pipeline(entries, name=node.name, node_id=node.id)
        if isinstance(node, ParallelSpec):
            merge: Any = (
                MergeStrategy(node.merge)
                if node.merge in BUILTIN_MERGES
                else self.calls.get(node.merge)
            )
            return Parallel(
                children, merge=merge, timeout=node.timeout, name=node.name, node_id=node.id
            )
        if isinstance(node, RouterSpec):
            routes = [
                Route(
                    route.name,
                    child,
                    condition=None
                    if route.condition_name is None
                    else self.calls.get(route.condition_name),
                )
                for route, child in zip(node.routes, children, strict=False)
            ]
            classifier = (
                None
                if node.classifier is None
                else self.agent_or_callable(
                    node.classifier, f"{path}.classifier", f"{node.name}.classifier"
                )
            )
            fallback = children[-1] if node.fallback_step is not None else None
            return Router(
                routes, classifier=classifier, fallback=fallback, name=node.name, node_id=node.id
            )
        return RefinementLoop(
            children[0],
            self.agent_or_callable(node.evaluator, f"{path}.evaluator", f"{node.name}.evaluator"),
            self.calls.get(node.state_updater_name),
            max_iterations=node.max_iterations,
            timeout=node.timeout,
            convergence_window=node.convergence_window,
            convergence_threshold=node.convergence_threshold,
            confidence_threshold=node.confidence_threshold,
            keep_best=node.keep_best,
            name=node.name,
            node_id=node.id,
        )


def _inline(spec: AgentSpec | None) -> AgentSpec:
    if spec is None:  # pragma: no cover - the model guarantees exactly one
        raise HydrationError("an agent step without an agent")
    return spec


def _field(node: AgentStepSpec) -> str:
    return "agent_name" if node.agent_name is not None else "inline_spec"


def agents_in(spec: AnyNode, agent_registry: AgentRegistryLike | None = None) -> list[str]:
    """The names of the agents `spec` runs, in document order, each once: registered agents
    of agent steps, inline `AgentSpec`s' `name`s, and router classifiers / loop evaluators that
    name an agent (a string there names an agent when `agent_registry` has it; without a
    registry such strings are left out, as they may name callables).

    These are the `<agent>` parts of prompt targets (`"<agent>.system_prompt"`).
    """
    agents = None if agent_registry is None else as_agent_registry(agent_registry)
    names: list[str] = []
    for _, kind, ref in _references(spec):
        if kind == "inline" and isinstance(ref, AgentSpec):
            name = ref.name
        elif kind == "agent" or (kind == "agent_or_callable" and agents is not None):
            name = str(ref)
            if kind == "agent_or_callable" and agents is not None and name not in agents:
                continue
        else:
            continue
        if name not in names:
            names.append(name)
    return names


def _checked_prompts(
    prompt_overrides: Mapping[str, str] | None,
    spec: AnyNode,
    agent_registry: AgentRegistry,
) -> dict[str, str]:
    """Prompt overrides as agent name -> system prompt, each target checked against `spec`."""
    if not prompt_overrides:
        return {}
    present = agents_in(spec, agent_registry)
    prompts: dict[str, str] = {}
    for target, text in prompt_overrides.items():
        try:
            agent, _field_name = parse_prompt_target(target)
        except ValueError as exc:
            raise HydrationError(f"prompt_overrides: {exc}") from exc
        if agent not in present:
            raise HydrationError(
                f"prompt_overrides: {target!r} names agent {agent!r}, which this topology does "
                f"not run (its agents: {', '.join(present) or '(none)'})"
            )
        if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise HydrationError(
                f"prompt_overrides: {target!r} must be a str, got {type(text).__name__}"
            )
        prompts[agent] = text
    return prompts


def topology_from_spec(
    spec: AnyNode,
    *,
    callable_registry: CallableRegistryLike,
    agent_registry: AgentRegistryLike,
    agent_factory: InlineAgentFactory | None = None,
    allow_inline_agents: bool = False,
    prompt_overrides: Mapping[str, str] | None = None,
    hooks: HydrationHooks | None = None,
) -> Step:
    """Build the runtime object for a validated spec (semantics section 7).

    Args:
        spec: a validated spec (parse raw input with `core.ir.parse_topology` first); any node
            works, a whole topology gives a composite.
        callable_registry: the callables the spec may name (a `CallableRegistry` or a mapping
            of name -> callable).
        agent_registry: the agents the spec may name (an `AgentRegistry` or a mapping of name
            -> zero-argument factory).
        agent_factory: turns an inline `AgentSpec` into an agent (a callable, or an object with
            `spawn(spec)` such as `core.AgentFactory`); needed for inline agents.
        allow_inline_agents: accept inline `AgentSpec`s (with `agent_factory`); off by default,
            so a generated spec can only use registered agents.
        prompt_overrides: target name (`"<agent>.system_prompt"`) -> the system prompt that
            agent runs with here, for registered agents and inline `AgentSpec`s alike (see
            `core.agents.overrides`); every targeted agent must be one the spec runs
            (`agents_in`). None or empty: the agents' own prompts.

    Returns:
        The runtime step: a `Pipeline`, `Parallel`, `Router`, `RefinementLoop`, `AgentStep` or
        `FunctionStep`, each carrying its node's `id` as `node_id`.

    Raises:
        UnknownNamesError: some names are not registered; lists every one with its JSON path and
            kind, and the known names (nothing is built). It is also a `KeyError`.
        HydrationError: inline agents without permission or factory (names their paths), an
            agent factory that raises or returns a non-agent, or a runtime constructor that
            rejects a value (names the node's path); a prompt override whose target is malformed,
            names an agent the spec does not run, or targets an agent that has no prompt (an
            `AgentLike` that is not pydantic-ai underneath).
    """
    callable_registry = as_callable_registry(callable_registry)
    agent_registry = as_agent_registry(agent_registry)
    prompts = _checked_prompts(prompt_overrides, spec, agent_registry)
    refs = list(_references(spec))  # one walk for both checks
    unknown = _unknown(refs, callable_registry, agent_registry)
    if unknown:
        raise UnknownNamesError(unknown, _known_names(callable_registry, agent_registry))
    inline = [path for path, kind, _ in refs if kind == "inline"]
    if inline and (not allow_inline_agents or agent_factory is None):
        why = (
            "pass allow_inline_agents=True and an agent_factory to allow them"
            if not allow_inline_agents
            else "allow_inline_agents=True needs an agent_factory"
        )
        raise HydrationError(
            f"inline agent definitions are not allowed ({why}); found at: {', '.join(inline)}"
        )
    builder = _Builder(callable_registry, agent_registry, _spawn_fn(agent_factory), prompts, hooks)
    order = list(walk(spec))
    built: dict[str, Step] = {}
    for path, node in reversed(order):  # children before parents
        children = [built[path + suffix] for suffix, _ in child_slots(node)]
        try:
            built[path] = builder.node(node, path, children)
        except HydrationError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            raise HydrationError(
                f"cannot build the {node.node_kind} at {path}: {type(exc).__name__}: {exc}"
            ) from exc
    return built["$"] if hooks is None else hooks.root(built["$"])


# --- one composite kind ------------------------------------------------------------------------

_ComposedT = TypeVar("_ComposedT", Pipeline, Parallel, Router, RefinementLoop)


def _one_kind(
    spec: AnyNode,
    spec_type: type[AnyNode],
    runtime_type: type[_ComposedT],
    hydrator: str,
    *,
    callable_registry: CallableRegistryLike,
    agent_registry: AgentRegistryLike,
    agent_factory: InlineAgentFactory | None,
    allow_inline_agents: bool,
) -> _ComposedT:
    if not isinstance(spec, spec_type):
        raise TypeError(
            f"{hydrator} takes a {spec_type.__name__}, got a {type(spec).__name__}; "
            "topology_from_spec takes any kind"
        )
    built = topology_from_spec(
        spec,
        callable_registry=callable_registry,
        agent_registry=agent_registry,
        agent_factory=agent_factory,
        allow_inline_agents=allow_inline_agents,
    )
    if not isinstance(built, runtime_type):  # pragma: no cover - the builder maps kind to type
        raise HydrationError(f"{hydrator} built a {type(built).__name__}")
    return built


def pipeline_from_spec(
    spec: PipelineSpec,
    *,
    callable_registry: CallableRegistryLike,
    agent_registry: AgentRegistryLike,
    agent_factory: InlineAgentFactory | None = None,
    allow_inline_agents: bool = False,
) -> Pipeline:
    """`topology_from_spec` for a `PipelineSpec`: the live `Pipeline` (same arguments and errors).

    Raises:
        TypeError: `spec` is not a `PipelineSpec`.
    """
    return _one_kind(
        spec,
        PipelineSpec,
        Pipeline,
        "pipeline_from_spec",
        callable_registry=callable_registry,
        agent_registry=agent_registry,
        agent_factory=agent_factory,
        allow_inline_agents=allow_inline_agents,
    )


def parallel_from_spec(
    spec: ParallelSpec,
    *,
    callable_registry: CallableRegistryLike,
    agent_registry: AgentRegistryLike,
    agent_factory: InlineAgentFactory | None = None,
    allow_inline_agents: bool = False,
) -> Parallel:
    """`topology_from_spec` for a `ParallelSpec`: the live `Parallel` (same arguments and errors).

    Raises:
        TypeError: `spec` is not a `ParallelSpec`.
    """
    return _one_kind(
        spec,
        ParallelSpec,
        Parallel,
        "parallel_from_spec",
        callable_registry=callable_registry,
        agent_registry=agent_registry,
        agent_factory=agent_factory,
        allow_inline_agents=allow_inline_agents,
    )


def router_from_spec(
    spec: RouterSpec,
    *,
    callable_registry: CallableRegistryLike,
    agent_registry: AgentRegistryLike,
    agent_factory: InlineAgentFactory | None = None,
    allow_inline_agents: bool = False,
) -> Router:
    """`topology_from_spec` for a `RouterSpec`: the live `Router` (same arguments and errors).

    Raises:
        TypeError: `spec` is not a `RouterSpec`.
    """
    return _one_kind(
        spec,
        RouterSpec,
        Router,
        "router_from_spec",
        callable_registry=callable_registry,
        agent_registry=agent_registry,
        agent_factory=agent_factory,
        allow_inline_agents=allow_inline_agents,
    )


def refinement_loop_from_spec(
    spec: RefinementLoopSpec,
    *,
    callable_registry: CallableRegistryLike,
    agent_registry: AgentRegistryLike,
    agent_factory: InlineAgentFactory | None = None,
    allow_inline_agents: bool = False,
) -> RefinementLoop:
    """`topology_from_spec` for a `RefinementLoopSpec`: the live `RefinementLoop` (same arguments
    and errors).

    Raises:
        TypeError: `spec` is not a `RefinementLoopSpec`.
    """
    return _one_kind(
        spec,
        RefinementLoopSpec,
        RefinementLoop,
        "refinement_loop_from_spec",
        callable_registry=callable_registry,
        agent_registry=agent_registry,
        agent_factory=agent_factory,
        allow_inline_agents=allow_inline_agents,
    )
