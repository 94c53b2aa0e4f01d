"""The IR: frozen Pydantic models of an agent topology (semantics section 6).

A topology is a tree of *operation* nodes, discriminated on `kind`:

| kind              | model                 | children (step positions)                    |
|-------------------|-----------------------|----------------------------------------------|
| `agent_step`      | `AgentStepSpec`       | -                                            |
| `function_step`   | `FunctionStepSpec`    | -                                            |
| `pipeline`        | `PipelineSpec`        | `steps[i].operation`                         |
| `parallel`        | `ParallelSpec`        | `steps[i]`                                   |
| `router`          | `RouterSpec`          | `routes[i].step`, then `fallback_step`       |
| `refinement_loop` | `RefinementLoopSpec`  | `step`                                       |

`OperationSpec` is the union of all six (any step position); `TopologySpec` is the union of the
four composites (a whole topology). Classifiers and evaluators are not step positions: they are
an inline `AgentSpec` or a registered name. `AgentSpec` is the docs' agent contract
(`core.ir.agent_spec`); inside the IR it may declare its output only with `output_schema`, and
the old four-field inline agent loads converted, with a `DeprecationWarning`.

Rules enforced here (so every spec object is valid, however it was built):

- every model is frozen and rejects unknown fields;
- `AgentStepSpec` has exactly one of `agent_name` / `inline_spec`;
- a router has a classifier or at least one route with a `condition_name`, and its route names
  are unique after stripping whitespace and case-folding (the rule the runtime router matches
  classifier output with, so two routes can never be ambiguous);
- numeric ranges: `max_retries >= 0`, `max_iterations >= 1`, `convergence_window >= 1`,
  thresholds `>= 0`, timeouts `> 0` (seconds); no NaN or infinity anywhere;
- node `id`s are unique within a topology (checked at every composite, so the check also holds
  at the top).

Serialization always writes `kind` (first), whatever `model_dump` options are used, so a dump can
always be parsed back; JSON round trips are equal.

Depth and size limits are not model rules: they are enforced before deep parsing by
`core.ir.parse_topology` (see `core.ir.limits`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    model_serializer,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from core.ir.agent_spec import AgentSpec

__all__ = [
    "ATOMIC_KINDS",
    "COMPOSITE_KINDS",
    "KINDS",
    "NODE_TYPES",
    "AnyNode",
    "AgentSpec",
    "AgentStepSpec",
    "FunctionStepSpec",
    "OperationSpec",
    "ParallelSpec",
    "PipelineSpec",
    "PipelineStepEntry",
    "RefinementLoopSpec",
    "RouteSpec",
    "RouterSpec",
    "StepConfigSpec",
    "TopologySpec",
    "child_slots",
    "walk",
]

ATOMIC_KINDS: tuple[str, ...] = ("agent_step", "function_step")
"""The atomic node kinds (no children)."""
COMPOSITE_KINDS: tuple[str, ...] = ("pipeline", "parallel", "router", "refinement_loop")
"""The composite node kinds (a whole topology is one of these)."""
KINDS: tuple[str, ...] = ATOMIC_KINDS + COMPOSITE_KINDS
"""Every node kind, atomic first."""

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


def _not_blank(value: str) -> str:
    """Blank is what the runtime and the registries check: `not value.strip()`. The schema's
    `\\S` pattern alone (pydantic-core's Rust regex) lets U+001C..U+001F through."""
    if not value.strip():
        raise ValueError("must not be blank (whitespace only)")
    return value


Name = Annotated[str, Field(min_length=1, pattern=r"\S"), AfterValidator(_not_blank)]
"""A non-blank name: at least one character that `str.strip()` keeps."""
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A positive, finite duration in seconds."""
Threshold = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A non-negative, finite threshold."""


def _require_kind(schema: JsonDict) -> None:
    """JSON-schema hook: `kind` is required in the schema (it is the discriminator)."""
    required = schema.get("required")
    names: list[str] = [str(r) for r in required] if isinstance(required, list) else []
    if "kind" not in names:
        schema["required"] = ["kind", *names]


def _ir_agent(spec: AgentSpec) -> AgentSpec:
    """An inline agent in the IR is data only: `output_type` (a Python class) is refused."""
    if spec.output_type is not None:
        raise ValueError(
            "an inline agent in a topology cannot use output_type (a Python class, accepted "
            "only in code); declare its output with output_schema"
        )
    return spec


ir_agent = _ir_agent
"""`_ir_agent` by a public name (for `core.ir._fast`; the function keeps its name, which
validation error locations spell)."""

IRAgentSpec = Annotated[AgentSpec, AfterValidator(_ir_agent)]
"""An `AgentSpec` as the IR holds it: `output_schema` only."""


class _Node(BaseModel):
    """Base of every operation node: the optional `id` and the `kind`-keeping serializer."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, json_schema_extra=_require_kind
    )

    id: Name | None = None
    """Optional node id, unique within a topology; used by traces, diffs and the studio."""

    @property
    def node_kind(self) -> str:
        """The node's `kind` (every subclass has a `kind` literal field)."""
        kind: str = getattr(self, "kind")  # noqa: B009 (declared on each subclass)
        return kind

    @model_serializer(mode="wrap")
    def _serialize_with_kind(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Serialize as usual, then put `kind` first even if dump options excluded it."""
        data: dict[str, Any] = handler(self)
        out: dict[str, Any] = {"kind": self.node_kind}
        for key, value in data.items():
            if key != "kind":
                out[key] = value
        return out


class AgentStepSpec(_Node):
    """Run an agent: a registered one (`agent_name`) or an inline definition (`inline_spec`)."""

    kind: Literal["agent_step"] = "agent_step"
    """Discriminator."""
    agent_name: Name | None = None
    """Name of an agent in the agent registry (exactly one of this and `inline_spec`)."""
    inline_spec: IRAgentSpec | None = None
    """An inline agent definition (exactly one of this and `agent_name`)."""

    @model_validator(mode="after")
    def _exactly_one(self) -> AgentStepSpec:
        if (self.agent_name is None) == (self.inline_spec is None):
            raise ValueError("an agent step needs exactly one of agent_name and inline_spec")
        return self


class FunctionStepSpec(_Node):
    """Run a registered callable `fn(input) -> output` (sync or async)."""

    kind: Literal["function_step"] = "function_step"
    """Discriminator."""
    callable_name: Name
    """Name of a callable in the callable registry."""
    name: Name | None = None
    """The step name; default `callable_name`."""


class StepConfigSpec(BaseModel):
    """How a pipeline treats one step's failure (runtime `StepConfig`)."""

    model_config = _CONFIG

    name: str = ""
    """Display name of the step in pipeline events ("" = the step's own name)."""
    on_error: Literal["stop", "skip", "retry"] = "stop"
    """`stop` raises, `skip` passes the step's input on, `retry` tries again."""
    max_retries: int = Field(default=1, ge=0)
    """Extra attempts with `on_error="retry"` (so up to `max_retries + 1` attempts)."""


class PipelineStepEntry(BaseModel):
    """One pipeline position: an operation and its optional error-handling config."""

    model_config = _CONFIG

    operation: OperationSpec
    """The step at this position."""
    config: StepConfigSpec | None = None
    """Error handling for this step; None = the runtime default (stop)."""


class PipelineSpec(_Node):
    """Run steps in order, each output feeding the next step."""

    kind: Literal["pipeline"] = "pipeline"
    """Discriminator."""
    steps: list[PipelineStepEntry] = Field(min_length=1)
    """The steps in order (at least one)."""
    name: Name = "pipeline"
    """The pipeline's name."""

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> PipelineSpec:
        _check_ids(self, info)
        return self


class ParallelSpec(_Node):
    """Run steps concurrently on the same input and merge their outputs."""

    kind: Literal["parallel"] = "parallel"
    """Discriminator."""
    steps: list[OperationSpec] = Field(min_length=1)
    """The branches, in order (at least one)."""
    merge: Name = "collect_all"
    """Merge: a built-in (`collect_all`, `first_wins`, `fastest`) or a registered callable name."""
    timeout: Seconds | None = None
    """One wall-clock budget for the whole group, in seconds; None = no limit."""
    name: Name = "parallel"
    """The parallel group's name."""

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> ParallelSpec:
        _check_ids(self, info)
        return self


class RouteSpec(BaseModel):
    """One router branch."""

    model_config = _CONFIG

    name: Name
    """The route name a classifier answers with (matched after strip + case-fold)."""
    step: OperationSpec
    """The step this route runs."""
    condition_name: Name | None = None
    """Registered predicate `input -> bool` (used only when the router has no classifier)."""


class RouterSpec(_Node):
    """Run exactly one route, chosen by a classifier or by route conditions."""

    kind: Literal["router"] = "router"
    """Discriminator."""
    routes: list[RouteSpec] = Field(min_length=1)
    """The routes, in order (at least one; names unique after strip + case-fold)."""
    classifier: IRAgentSpec | Name | None = None
    """An inline agent, or a name (agent registry, then callable registry) that returns a route
    name; None = first route whose condition holds."""
    fallback_step: OperationSpec | None = None
    """Runs when nothing matches; None = a no-match error."""
    name: Name = "router"
    """The router's name."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> RouterSpec:
        check_router_rules(self)
        _check_ids(self, info)
        return self


def check_router_rules(router: RouterSpec) -> None:
    """A router's own rules (not the unique ids): a classifier or a route condition, and route
    names unique after strip + case-fold. Raises ValueError."""
    routes = router.routes
    if router.classifier is None:
        for route in routes:
            if route.condition_name is not None:
                break
        else:
            raise ValueError("a router needs a classifier or at least one route condition_name")
    if len(routes) < 2 or len({r.name.strip().casefold() for r in routes}) == len(routes):
        return  # every spec a router validates: one set, no loop (the message needs the loop)
    seen: dict[str, str] = {}
    for route in routes:
        key = route.name.strip().casefold()
        if key in seen:
            raise ValueError(
                f"duplicate route name {route.name!r} (same as {seen[key]!r} after strip and "
                "case-fold)"
            )
        seen[key] = route.name


class RefinementLoopSpec(_Node):
    """Run a step, evaluate its output, update the input, until an exit condition holds."""

    kind: Literal["refinement_loop"] = "refinement_loop"
    """Discriminator."""
    step: OperationSpec
    """The step run on every iteration."""
    evaluator: IRAgentSpec | Name
    """An inline agent, or a name (agent registry, then callable registry) returning an
    `EvalResult(passed, feedback, score)`."""
    state_updater_name: Name
    """Registered callable `(input, output, eval_result) -> next_input`."""
    max_iterations: int = Field(default=5, ge=1)
    """At most this many iterations."""
    timeout: Seconds | None = None
    """Hard deadline for the whole loop, in seconds; None = no limit."""
    convergence_window: int | None = Field(default=None, ge=1)
    """Exit `converged` when the last this-many scores span less than the threshold; None = off."""
    convergence_threshold: Threshold = 0.01
    """The score span below which the loop has converged."""
    confidence_threshold: Threshold | None = None
    """Exit `confident` when a score reaches this; None = off."""
    keep_best: bool = True
    """On a non-passing exit, return the best-scoring iteration's output."""
    name: Name = "refinement_loop"
    """The loop's name."""

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> RefinementLoopSpec:
        _check_ids(self, info)
        return self


class _AnyOfSchema:
    """JSON-schema hook for the node unions: `anyOf` instead of Pydantic's `oneOf`.

    The alternatives are disjoint (each has its own `kind` constant), so the two mean the same;
    `anyOf` is what every provider's structured-output mode accepts (OpenAI strict mode and
    Gemini reject `oneOf`), so no provider transform has to rewrite it (F2).
    """

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        if "oneOf" in schema:
            schema["anyOf"] = schema.pop("oneOf")
        return schema


OperationSpec = Annotated[
    AgentStepSpec
    | FunctionStepSpec
    | PipelineSpec
    | ParallelSpec
    | RouterSpec
    | RefinementLoopSpec,
    Field(discriminator="kind"),
    _AnyOfSchema(),
]
"""Any node: what a step position holds."""

TopologySpec = Annotated[
    PipelineSpec | ParallelSpec | RouterSpec | RefinementLoopSpec,
    Field(discriminator="kind"),
    _AnyOfSchema(),
]
"""A whole topology: one of the four composites."""

AnyNode = (
    AgentStepSpec | FunctionStepSpec | PipelineSpec | ParallelSpec | RouterSpec | RefinementLoopSpec
)
"""The six node classes as a plain union (for type annotations)."""

NODE_TYPES: tuple[type[AnyNode], ...] = (
    AgentStepSpec,
    FunctionStepSpec,
    PipelineSpec,
    ParallelSpec,
    RouterSpec,
    RefinementLoopSpec,
)
"""The six node classes, for `isinstance` checks."""

for _model in (PipelineStepEntry, PipelineSpec, ParallelSpec, RouteSpec, RouterSpec):
    _model.model_rebuild()
RefinementLoopSpec.model_rebuild()


def child_slots(node: AnyNode) -> list[tuple[str, AnyNode]]:
    """The node's children in document order, each with its JSON-path suffix.

    Example: a pipeline with two steps gives `[(".steps[0].operation", a), (".steps[1].operation",
    b)]`; a router gives its route steps, then `(".fallback_step", f)` if set.
    """
    if isinstance(node, PipelineSpec):
        return [(f".steps[{i}].operation", e.operation) for i, e in enumerate(node.steps)]
    if isinstance(node, ParallelSpec):
        return [(f".steps[{i}]", s) for i, s in enumerate(node.steps)]
    if isinstance(node, RouterSpec):
        out: list[tuple[str, AnyNode]] = [
            (f".routes[{i}].step", r.step) for i, r in enumerate(node.routes)
        ]
        if node.fallback_step is not None:
            out.append((".fallback_step", node.fallback_step))
        return out
    if isinstance(node, RefinementLoopSpec):
        return [(".step", node.step)]
    return []


def walk(node: AnyNode, root_path: str = "$") -> Iterator[tuple[str, AnyNode]]:
    """Every node under (and including) `node`, pre-order, with its JSON path. Iterative."""
    stack: list[tuple[str, AnyNode]] = [(root_path, node)]
    while stack:
        path, current = stack.pop()
        yield path, current
        children = child_slots(current)
        for suffix, child in reversed(children):
            stack.append((path + suffix, child))


ID_MEMO_CONTEXT_KEY = "core.ir.ids_below"
"""Validation-context key: a dict that `parse_topology` passes so that each composite learns the
ids below it from its children, once per node, instead of walking its subtree (`_check_ids`).
"""


def _check_ids(node: AnyNode, info: ValidationInfo) -> None:
    """`_check_unique_ids(node)`, in O(children) when the validation context carries a memo.

    Validation is bottom-up, so every composite child validated in this call has left the ids
    of its subtree in the memo (keyed by `id()`, holding the child so the key cannot be reused
    while the memo lives); a child that was not (an instance passed in) is walked. Any repeat
    raises the same error as `_check_unique_ids`, from the same pre-order walk.
    """
    context: dict[str, Any] | None = info.context
    memo: _IdMemo | None = (
        context.get(ID_MEMO_CONTEXT_KEY) if type(context) is dict else None  # pyright: ignore[reportUnnecessaryComparison]
    )
    if memo is None:
        _check_unique_ids(node)
        return
    found: set[str] | None = None
    for child in _direct_children(node):
        entry = memo.get(id(child))
        if entry is not None and entry[0] is child:
            below: Iterable[str] = entry[1]
        elif type(child) in _ATOMIC_TYPES:
            if child.id is None:
                continue
            below = (child.id,)
        else:
            below = [n.id for _, n in walk(child) if n.id is not None]
        if not below:
            continue
        if found is None:
            found = set()
        for node_id in below:
            if node_id in found:
                _raise_duplicate_id(node)
            found.add(node_id)
    if node.id is not None:
        if found is None:
            found = set()
        elif node.id in found:
            _raise_duplicate_id(node)
        found.add(node.id)
    memo[id(node)] = (node, found or _NO_IDS)


_NO_IDS: frozenset[str] = frozenset()
_IdMemo = dict[int, tuple[AnyNode, AbstractSet[str]]]
"""`ID_MEMO_CONTEXT_KEY`'s memo: `id(node)` -> the node and the ids of its subtree."""
_ATOMIC_TYPES = frozenset({AgentStepSpec, FunctionStepSpec})


def _direct_children(node: AnyNode) -> list[AnyNode]:
    if isinstance(node, PipelineSpec):
        return [entry.operation for entry in node.steps]
    if isinstance(node, ParallelSpec):
        return node.steps
    if isinstance(node, RouterSpec):
        children = [route.step for route in node.routes]
        if node.fallback_step is not None:
            children.append(node.fallback_step)
        return children
    if isinstance(node, RefinementLoopSpec):
        return [node.step]
    return []


def _check_unique_ids(node: AnyNode) -> None:
    """Raise ValueError naming both paths (relative to `node`) if two nodes share an id.

    Every composite checks its whole subtree, so a spec's validation visits each node once per
    composite above it: the visit is kept lean (no paths, no `child_slots` lists), and the
    paths are worked out only for the message, when there is a duplicate (the walk
    with paths was three quarters of validating a 31-node spec).
    """
    seen: set[str] = set()
    stack: list[AnyNode] = [node]
    while stack:
        current = stack.pop()
        node_id = current.id
        if node_id is not None:
            if node_id in seen:
                _raise_duplicate_id(node)
            seen.add(node_id)
        if isinstance(current, PipelineSpec):
            stack.extend([entry.operation for entry in current.steps])
        elif isinstance(current, ParallelSpec):
            stack.extend(current.steps)
        elif isinstance(current, RouterSpec):
            stack.extend([route.step for route in current.routes])
            if current.fallback_step is not None:
                stack.append(current.fallback_step)
        elif isinstance(current, RefinementLoopSpec):
            stack.append(current.step)


def _raise_duplicate_id(node: AnyNode) -> None:
    """The ValueError of `_check_unique_ids`: the first repeated id in pre-order, both paths."""
    seen: dict[str, str] = {}
    for path, current in walk(node):
        if current.id is None:
            continue
        if current.id in seen:
            raise ValueError(
                f"duplicate node id {current.id!r} at {seen[current.id]} and {path} "
                "(ids must be unique within a topology)"
            )
        seen[current.id] = path
