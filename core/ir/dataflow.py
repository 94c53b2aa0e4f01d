"""What registered names read and produce, and what a topology does with them, before it runs.

A problem declares, per registered name, a `NameEffect`: how many candidate answers a callable
needs on its input to mean anything (a vote needs two, an arithmetic check one, a question-length
test none), how many a step adds (a model agent adds one), whether a merge keeps every branch's
candidates or one branch's, and, for conditions, whether "true" means the answer is acceptable
or suspect. `EffectTable` holds them. From that alone, with no model call:

- `analyse(spec, table)` walks the topology once, tracking the number of candidates a node's
  input can hold (an interval `lo..hi`, `hi` at most `UNBOUNDED`) and whether an agent
  answered on every path, and returns the static rejections (`StaticIssue`) with a named `code`
  and JSON path:

  | code                             | when                                                    |
  |----------------------------------|---------------------------------------------------------|
  | `condition_before_input`         | a route condition (of a router with no classifier), a   |
  |                                  | classifier or a loop evaluator needs more candidates    |
  |                                  | than any earlier step can produce                       |
  | `fastest_branch_without_answer`  | a `fastest` race of two or more branches, one in which  |
  |                                  | no agent answers (it would win with no answer, and hide |
  |                                  | the spend of the branches it cancelled)                 |
  | `no_agent`                       | a path on which no agent answers (no agent step at all, |
  |                                  | or e.g. a route that keeps an answer nobody gave),      |
  |                                  | where the problem's answers need one                    |
  |                                  | (`EffectTable.answer_needs_agent`)                      |
  | `router_matches_nothing`         | a router with no fallback and no classifier whose every |
  |                                  | route condition is constant on its input                |

- `normalize(spec, table)` rewrites behavioural no-ops away, so two topologies that must behave
  the same get the same canonical hash (`behaviour_hash`): a function step that needs more
  candidates than its input can hold (a vote or an extraction over at most one candidate), an
  identity step beside others, a one-branch parallel whose merge keeps one branch (or a
  candidate-collecting merge over at most one candidate), a one-step nested pipeline, a router
  whose every route runs the same step as its fallback (when it has no classifier, or one
  declared as a callable: an agent classifier costs money even when every route is the same), a
  route on a declared complement condition (`router(not C -> A, else B)` becomes
  `router(C -> B, else A)`, only where the input surely holds the candidates both conditions
  read), routes that never match (no condition, or one an earlier route tests, when there is no
  classifier), and what changes nothing: node names and ids, route names when no classifier
  reads them, route conditions when one does, a step config's display name, a `stop` config
  (the default), `max_retries` without `retry`.

A refinement loop's step runs on the loop's input first, then on whatever its state updater
returns (taken as unknown: any number of candidates), so it is analysed and normalised on both
(a vote inside a loop body is not a no-op because the first iteration has one candidate).

Names the table does not list get `UNKNOWN_EFFECT` for callables: needs nothing, and, as a step
or a merge, its output is taken to hold any number of candidates (`0..UNBOUNDED`) and an answer,
so no rejection and no rewrite can come from them; agent steps get `AGENT_EFFECT`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.ir.canonical import spec_hash
from core.ir.models import (
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
    TopologySpec,
    walk,
)

__all__ = [
    "AGENT_EFFECT",
    "BUILTIN_MERGE_EFFECTS",
    "STATIC_ISSUE_CODES",
    "UNBOUNDED",
    "UNKNOWN_EFFECT",
    "Analysis",
    "EffectTable",
    "Flow",
    "NameEffect",
    "StaticIssue",
    "analyse",
    "behaviour_hash",
    "normalize",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

STATIC_ISSUE_CODES: tuple[str, ...] = (
    "condition_before_input",
    "fastest_branch_without_answer",
    "no_agent",
    "router_matches_nothing",
)
"""Every static rejection code, in the order the run summary lists them."""

UNBOUNDED = 1 << 30
"""`Flow.hi` when the number of candidates is not bounded (after an undeclared step or merge, or
in a loop's later iterations); counts saturate there."""


class NameEffect(BaseModel):
    """What one registered name reads and produces (declared by the problem)."""

    model_config = _CONFIG

    needs_candidates: int = Field(default=0, ge=0)
    """Candidates the input must hold for the name to mean anything: a condition, classifier or
    evaluator is constant below it (a static rejection), a step is a no-op below it (normalised
    away). 0: it reads only the question (or nothing)."""
    adds_candidates: int = Field(default=0, ge=0)
    """Candidates a step adds to its input (a model agent: 1)."""
    answers: bool = False
    """The step produces an answer by itself (a model agent), not only from candidates."""
    identity: bool = False
    """A step that returns its input unchanged (e.g. 'keep the answer' in an accept route)."""
    combine: Literal["all", "one"] | None = None
    """A merge: `"all"` keeps every branch's candidates (counts add up), `"one"` one branch's
    output; None: not a merge, or unknown (no rewrite)."""
    verdict: Literal["accept", "reject"] | None = None
    """A condition: `"accept"` when true means the current answer looks right, `"reject"` when
    true means it looks wrong (what the cascade operators use); None: neither."""
    complement_of: str | None = None
    """A condition that is the negation of this other registered condition on every input that
    holds at least the candidates both read (`needs_candidates`; below that both may be false,
    e.g. "candidates agree" and "candidates disagree" on one candidate)."""
    calls_agent: str | None = None
    """A callable that runs this registered agent (a judge or critic of the standard library):
    its calls are costed like any call, and the opening bounds how many such judges it tries."""


AGENT_EFFECT = NameEffect(adds_candidates=1, answers=True)
"""An agent step's default: adds one candidate, answers."""
UNKNOWN_EFFECT = NameEffect()
"""An undeclared callable: needs nothing, adds nothing, answers nothing."""
BUILTIN_MERGE_EFFECTS: Mapping[str, NameEffect] = {
    "fastest": NameEffect(combine="one"),
    "first_wins": NameEffect(combine="one"),
    "collect_all": NameEffect(),
}
"""The runtime's built-in merges: `fastest` and `first_wins` return one branch's output;
`collect_all` returns a list (no state rule applies: its output is taken as unknown)."""


class EffectTable(BaseModel):
    """Every declared `NameEffect` by registered name, and the problem-wide rule."""

    model_config = _CONFIG

    names: Mapping[str, NameEffect] = Field(default_factory=dict[str, NameEffect])
    """Registered name -> its effect (callables and agents; agents default to `AGENT_EFFECT`)."""
    answer_needs_agent: bool = False
    """The problem's answers come only from agents: a topology with a path on which no agent
    answers (no agent step at all, or a route or branch that runs none) is rejected statically
    with `no_agent` (it would return no answer on the inputs that take that path)."""
    sampled_agents: bool = False
    """Repeated identical calls of one agent may answer differently (sampled models; the call
    cache keys each repeat apart): self-consistency votes, the same agent k times, are worth
    proposing."""

    def callable(self, name: str) -> NameEffect:
        """The effect of callable `name` (`BUILTIN_MERGE_EFFECTS`, then declared, else
        `UNKNOWN_EFFECT`)."""
        if name in self.names:
            return self.names[name]
        return BUILTIN_MERGE_EFFECTS.get(name, UNKNOWN_EFFECT)

    def agent(self, name: str | None) -> NameEffect:
        """The effect of agent `name` (declared, else `AGENT_EFFECT`)."""
        if name is not None and name in self.names:
            return self.names[name]
        return AGENT_EFFECT


@dataclass(frozen=True, slots=True)
class Flow:
    """What a node's input or output can hold: `lo..hi` candidates, and whether an agent
    answered on every path to it."""

    lo: int = 0
    hi: int = 0
    answered: bool = False

    def add(self, n: int, answers: bool) -> Flow:
        """This flow after a step that adds `n` candidates (and answers, or not); counts
        saturate at `UNBOUNDED`."""
        return Flow(
            min(self.lo + n, UNBOUNDED), min(self.hi + n, UNBOUNDED), self.answered or answers
        )

    def join(self, other: Flow) -> Flow:
        """What either this flow or `other` can hold (one of two paths was taken)."""
        return Flow(
            min(self.lo, other.lo), max(self.hi, other.hi), self.answered and other.answered
        )


_ANYTHING = Flow(0, UNBOUNDED, True)
"""The output of an undeclared step or merge, or a loop's updated input: anything."""


@dataclass(frozen=True, slots=True)
class StaticIssue:
    """One static rejection: `code` (one of `STATIC_ISSUE_CODES`), the node's JSON path, and a
    sentence saying what is wrong."""

    code: str
    path: str
    message: str

    def reason(self) -> str:
        """`"<code>: <message> (at <path>)"`, the form rejection reasons take."""
        return f"{self.code}: {self.message} (at {self.path})"


@dataclass(frozen=True, slots=True)
class Analysis:
    """`analyse`'s result: the topology's output flow and its static issues, in document
    order."""

    out: Flow
    issues: tuple[StaticIssue, ...]
    n_agent_steps: int

    @property
    def ok(self) -> bool:
        """No static issue."""
        return not self.issues


def analyse(spec: AnyNode, table: EffectTable, start: Flow | None = None) -> Analysis:
    """Walk `spec` from `start` (default: a bare question, no candidate) and report.

    Returns:
        An `Analysis`: the output `Flow`, every `StaticIssue` in document order, and the number
        of agent steps. With `table.answer_needs_agent` and a path on which no agent answers (the
        output flow is not `answered`), a `no_agent` issue at `$` comes first.
    """
    walker = _Analyser(table)
    out = walker.node(spec, "$", start or Flow())
    issues = list(walker.issues)
    if table.answer_needs_agent and (walker.n_agents == 0 or not out.answered):
        what = "no agent step" if walker.n_agents == 0 else "a path on which no agent answers"
        issues.insert(
            0,
            StaticIssue("no_agent", "$", f"{what}: the problem's answers come only from agents"),
        )
    return Analysis(out, tuple(issues), walker.n_agents)


class _Analyser:
    def __init__(self, table: EffectTable) -> None:
        self.table = table
        self.issues: list[StaticIssue] = []
        self.n_agents = 0

    def _reads(self, name: str, what: str, path: str, flow: Flow) -> bool:
        """Record `condition_before_input` when `name` needs more than `flow` can hold; True
        when it is constant there."""
        need = self.table.callable(name).needs_candidates
        if need > flow.hi:
            have = "no candidate" if flow.hi == 0 else f"at most {flow.hi} candidate(s)"
            self.issues.append(
                StaticIssue(
                    "condition_before_input",
                    path,
                    f"{what} {name!r} reads {need} candidate(s), but its input holds {have} "
                    "(it is constant there)",
                )
            )
            return True
        return False

    def node(self, node: AnyNode, path: str, flow: Flow) -> Flow:
        if isinstance(node, AgentStepSpec):
            self.n_agents += 1
            effect = self.table.agent(node.agent_name)
            return flow.add(effect.adds_candidates, effect.answers)
        if isinstance(node, FunctionStepSpec):
            effect = self.table.callable(node.callable_name)
            if node.callable_name not in self.table.names:
                # undeclared: it may do anything (nothing is rejected or rewritten for it)
                return Flow(0, UNBOUNDED, True)
            if effect.needs_candidates > flow.hi:
                return flow  # a no-op there (normalize removes it)
            return flow.add(effect.adds_candidates, effect.answers)
        if isinstance(node, PipelineSpec):
            for i, entry in enumerate(node.steps):
                flow = self.node(entry.operation, f"{path}.steps[{i}].operation", flow)
            return flow
        if isinstance(node, ParallelSpec):
            outs = [self.node(s, f"{path}.steps[{i}]", flow) for i, s in enumerate(node.steps)]
            merge = self.table.callable(node.merge)
            if node.merge == "fastest" and len(outs) > 1:  # one branch races nothing
                for i, out in enumerate(outs):
                    if not out.answered:
                        self.issues.append(
                            StaticIssue(
                                "fastest_branch_without_answer",
                                f"{path}.steps[{i}]",
                                "a branch of a 'fastest' race in which no agent answers (it can "
                                "win with no answer)",
                            )
                        )
            if merge.combine == "one":
                return Flow(
                    min(o.lo for o in outs), max(o.hi for o in outs), all(o.answered for o in outs)
                )
            if merge.combine == "all":
                return Flow(
                    min(sum(o.lo for o in outs), UNBOUNDED),
                    min(sum(o.hi for o in outs), UNBOUNDED),
                    any(o.answered for o in outs),
                )
            # an undeclared merge (or `collect_all`, a list): its output is unknown
            return Flow(0, UNBOUNDED, any(o.answered for o in outs))
        if isinstance(node, RouterSpec):
            if isinstance(node.classifier, str) and self._is_callable_name(node.classifier):
                self._reads(node.classifier, "classifier", f"{path}.classifier", flow)
            live = _live_routes(node)
            constant = 0
            if node.classifier is None:  # with a classifier the conditions are never evaluated
                for i in live:
                    condition = node.routes[i].condition_name
                    assert condition is not None
                    where = f"{path}.routes[{i}].condition_name"
                    constant += self._reads(condition, "condition", where, flow)
                if node.fallback_step is None and constant == len(live):
                    self.issues.append(
                        StaticIssue(
                            "router_matches_nothing",
                            path,
                            "a router with no fallback whose every condition is constant on its "
                            "input",
                        )
                    )
            outs = [self.node(node.routes[i].step, f"{path}.routes[{i}].step", flow) for i in live]
            if node.fallback_step is not None:
                outs.append(self.node(node.fallback_step, f"{path}.fallback_step", flow))
            return Flow(
                min(o.lo for o in outs), max(o.hi for o in outs), all(o.answered for o in outs)
            )
        assert isinstance(node, RefinementLoopSpec)
        out = self.node(node.step, f"{path}.step", _loop_input(node, flow))
        if isinstance(node.evaluator, str) and self._is_callable_name(node.evaluator):
            self._reads(node.evaluator, "evaluator", f"{path}.evaluator", out)
        if not out.answered and any(isinstance(n, AgentStepSpec) for _, n in walk(node.step)):
            # which path an iteration takes depends on the state updater's result: a loop
            # whose step holds an agent is taken to answer (no false `no_agent`)
            out = Flow(out.lo, out.hi, True)
        return out

    def _is_callable_name(self, name: str) -> bool:
        # a declared agent (classifier / evaluator by agent name) reads the whole input
        effect = self.table.names.get(name)
        return effect is None or effect.adds_candidates == 0


def _live_routes(node: RouterSpec) -> list[int]:
    """Indices of the routes that can run: all with a classifier; without one, those with a
    condition that no earlier route already tests (a route with no condition never matches,
    and the first true condition wins)."""
    if node.classifier is not None:
        return list(range(len(node.routes)))
    seen: set[str] = set()
    out: list[int] = []
    for i, route in enumerate(node.routes):
        if route.condition_name is not None and route.condition_name not in seen:
            seen.add(route.condition_name)
            out.append(i)
    return out


def _loop_input(node: RefinementLoopSpec, flow: Flow) -> Flow:
    """What the loop's step can get: the loop's input `flow` on the first iteration, then the
    state updater's result (unknown) on the later ones."""
    return flow if node.max_iterations == 1 else flow.join(_ANYTHING)


# --- normalisation -----------------------------------------------------------------------------


def normalize(spec: AnyNode, table: EffectTable) -> TopologySpec:
    """The behavioural normal form of `spec` (see the module docstring): ids and names dropped,
    no-ops rewritten away; the root is always a composite (a lone step becomes a one-step
    pipeline). Deterministic; normalising twice gives the same form."""
    node = _Normalizer(table).node(spec, Flow(), root=True)
    if isinstance(node, AgentStepSpec | FunctionStepSpec):
        node = PipelineSpec(steps=[PipelineStepEntry(operation=node)])
    assert not isinstance(node, AgentStepSpec | FunctionStepSpec)
    return node


def _config(config: StepConfigSpec | None) -> StepConfigSpec | None:
    """A step config as it behaves: `stop` is the default (None), the display name is dropped,
    and `max_retries` counts only with `retry`."""
    if config is None or config.on_error == "stop":
        return None
    if config.on_error == "skip":
        return StepConfigSpec(on_error="skip")
    return StepConfigSpec(on_error="retry", max_retries=config.max_retries)


def behaviour_hash(spec: AnyNode, table: EffectTable) -> str:
    """`spec_hash(normalize(spec, table))`: equal for topologies that must behave the same."""
    return spec_hash(normalize(spec, table))


class _Normalizer:
    def __init__(self, table: EffectTable) -> None:
        self.table = table
        self.flows = _Analyser(table)

    def _flow(self, node: AnyNode, flow: Flow) -> Flow:
        return self.flows.node(node, "$", flow)

    def node(self, node: AnyNode, flow: Flow, root: bool = False) -> AnyNode:
        if isinstance(node, AgentStepSpec):
            return AgentStepSpec(agent_name=node.agent_name, inline_spec=node.inline_spec)
        if isinstance(node, FunctionStepSpec):
            return FunctionStepSpec(callable_name=node.callable_name)
        if isinstance(node, PipelineSpec):
            return self._pipeline(node, flow, root)
        if isinstance(node, ParallelSpec):
            branches = [self.node(s, flow) for s in node.steps]
            merge = self.table.callable(node.merge)
            if len(branches) == 1 and node.timeout is None:
                only = branches[0]
                if merge.combine == "one" or (
                    merge.combine == "all"
                    and self._flow(only, flow).hi <= 1
                    and not merge.needs_candidates
                ):
                    return only
            return ParallelSpec(steps=branches, merge=node.merge, timeout=node.timeout)
        if isinstance(node, RouterSpec):
            return self._router(node, flow)
        assert isinstance(node, RefinementLoopSpec)
        data = {
            k: getattr(node, k) for k in node.model_fields_set if k not in ("id", "name", "step")
        }
        return RefinementLoopSpec(**data, step=self.node(node.step, _loop_input(node, flow)))

    def _pipeline(self, node: PipelineSpec, flow: Flow, root: bool) -> AnyNode:
        entries: list[PipelineStepEntry] = []
        for entry in node.steps:
            op = self.node(entry.operation, flow)
            config = _config(entry.config)
            if config is None and isinstance(op, PipelineSpec):
                parts = list(op.steps)  # a nested pipeline: splice its steps in
            else:
                parts = [PipelineStepEntry(operation=op, config=config)]
            for part in parts:
                if part.config is None and isinstance(part.operation, FunctionStepSpec):
                    effect = self.table.callable(part.operation.callable_name)
                    if effect.identity or effect.needs_candidates > flow.hi:
                        continue  # a no-op here
                entries.append(part)
                flow = self._flow(part.operation, flow)
        if not entries:  # every step was a no-op: keep the last one (a pipeline is never empty)
            last = node.steps[-1]
            entries = [
                PipelineStepEntry(
                    operation=self.node(last.operation, flow), config=_config(last.config)
                )
            ]
        if len(entries) == 1 and entries[0].config is None and not root:
            return entries[0].operation
        if len(entries) == 1 and entries[0].config is None and root:
            only = entries[0].operation
            if not isinstance(only, AgentStepSpec | FunctionStepSpec):
                return only  # pipeline[composite] is that composite
        return PipelineSpec(steps=entries)

    def _router(self, node: RouterSpec, flow: Flow) -> AnyNode:
        kept = [node.routes[i] for i in _live_routes(node)]
        routes = [(r, self.node(r.step, flow)) for r in kept]
        fallback = None if node.fallback_step is None else self.node(node.fallback_step, flow)
        if fallback is not None and self._classifier_is_free(node.classifier):
            hashes = {spec_hash(step) for _, step in routes}
            if hashes == {spec_hash(fallback)}:
                return fallback
        if node.classifier is not None:
            return RouterSpec(
                routes=[
                    # the classifier alone chooses: route conditions change nothing
                    RouteSpec(name=r.name, step=s)
                    for r, s in routes
                ],
                classifier=node.classifier,
                fallback_step=fallback,
            )
        if len(routes) == 1 and fallback is not None and routes[0][0].condition_name is not None:
            routes_step = routes[0][1]
            condition, negated = self._canonical_condition(routes[0][0].condition_name, flow)
            if negated:
                routes = [(RouteSpec(name="r", step=fallback, condition_name=condition), fallback)]
                fallback = routes_step
            else:
                step = routes[0][1]
                routes = [(RouteSpec(name="r", step=step, condition_name=condition), step)]
        return RouterSpec(
            routes=[
                RouteSpec(name=f"r{i}", step=s, condition_name=r.condition_name)
                for i, (r, s) in enumerate(routes)
            ],
            fallback_step=fallback,
        )

    def _classifier_is_free(self, classifier: object) -> bool:
        """Whether the router's classifier (if any) can be dropped: none, or a name declared as a
        callable (an inline or registered agent classifier costs money; an undeclared name may
        be an agent, which the hydrator looks up first)."""
        if classifier is None:
            return True
        if not isinstance(classifier, str) or classifier not in self.table.names:
            return False
        effect = self.table.names[classifier]
        return effect.adds_candidates == 0 and not effect.answers

    def _canonical_condition(self, condition: str, flow: Flow) -> tuple[str, bool]:
        """The representative of `condition`'s complement chain (`NameEffect.complement_of`,
        followed to its end, or to the smallest name on a cycle) and whether it is the
        negation of `condition`; `(condition, False)` when the input does not surely hold the
        candidates every condition on the way reads (below that a complement may not hold)."""
        chain = [condition]
        while True:
            nxt = self.table.callable(chain[-1]).complement_of
            if nxt is None or nxt in chain:
                if nxt is not None:  # a cycle: its smallest name represents it
                    start = chain.index(nxt)
                    best = min(range(start, len(chain)), key=lambda i: chain[i])
                    chain = chain[: best + 1]
                break
            chain.append(nxt)
        need = max(self.table.callable(c).needs_candidates for c in chain)
        if len(chain) == 1 or flow.lo < need:
            return condition, False
        return chain[-1], (len(chain) - 1) % 2 == 1
