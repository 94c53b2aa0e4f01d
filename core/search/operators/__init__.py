"""Structural mutation operators over the IR, for the model-free strategies.

Each operator takes a spec, a `MutationContext` (what a candidate may be built from) and a
`random.Random`, and returns a new valid `TopologySpec`, or None when it does not apply (no
target, no usable name) or its result breaks a rule. Everything is deterministic given the
generator's state: names are used in sorted order and nodes in document order.

| operator              | what it does                                                          |
|-----------------------|-----------------------------------------------------------------------|
| `insert_step`         | a new agent or function step at a random position of a pipeline       |
| `remove_step`         | removes a pipeline step, a parallel branch, a route or a fallback     |
|                       | (never the last of a list)                                            |
| `swap_steps`          | swaps two pipeline steps, parallel branches or routes                 |
| `wrap_in_parallel`    | a node becomes the first branch of a parallel with a new branch       |
| `add_parallel_branch` | a new branch in an existing parallel                                  |
| `add_router`          | a node becomes a router's fallback; inputs a registered condition     |
|                       | accepts go to a new step instead                                      |
| `add_cascade`         | a node handles the inputs a registered condition accepts; the rest    |
|                       | escalate to a new (e.g. stronger) step                                |
| `wrap_in_loop`        | a node becomes a refinement loop's step (registered evaluator and     |
|                       | state updater)                                                        |
| `unwrap`              | a composite is replaced by one of its children                        |
| `change_agent`        | an agent step uses another registered agent                           |
| `change_function`     | a function step uses another `step` callable                          |
| `change_merge`        | a parallel uses another merge                                         |
| `change_condition`    | a route uses another registered condition                             |
| `escalate_after`      | X becomes X, then a router that accepts X's answer on a condition     |
|                       | (declared verdict, needing no more candidates than X surely leaves)   |
|                       | and otherwise runs a dearer agent Y                                   |
| `agreement_gate`      | an agent X becomes X and Z in parallel collecting candidates, then    |
|                       | accept when a two-candidate condition holds (they agree), else Y      |
| `k_vote`              | an agent X becomes a vote of `vote_k` different agents (dearest       |
|                       | first, the tie-break order), collected, then a selection step         |
| `replace_branch`      | a parallel branch, route step or fallback becomes another agent       |

The four structure operators read the problem's declared effects (`ctx.effects`,
`core.ir.dataflow`): an identity step for the accept route, conditions with a verdict, merges
that collect candidates, selection steps (needing two candidates), and the agents' measured
costs (`ctx.agent_costs`) so escalation goes only to dearer agents. `opening_specs` builds the
same structures exhaustively from the registries for a strategy's first generations (on a
problem with only agents, from the standard library's entries, `core.combinators`). Every
operator's result also passes the static dataflow check, so no condition is ever placed where
its input does not exist.

New nodes carry no `id`. A result is valid when it parses within `ctx.limits`, its depth is at
most `ctx.max_depth`, and its kinds pass `ctx.allowed_step_kinds` (the evaluator's rule:
`core.evaluation.checks.check_allowed_kinds`). `mutate` adds that the result differs in
canonical hash from its input (and from any hash to avoid), and tries until one does.

The package's modules, each one seam: `_context` (`MutationContext`, the shared helpers),
`_edits` (the first thirteen operators above), `_structure` (the four structure operators, the
bridges and the opening) and `_mutate` (`OPERATORS`, `mutate`, `crossover`, `random_spec`).
"""

from __future__ import annotations

from core.hydrate import BUILTIN_MERGES
from core.search.operators._context import ROLES, MutationContext, Operator, is_valid_candidate
from core.search.operators._edits import (
    add_cascade,
    add_parallel_branch,
    add_router,
    change_agent,
    change_condition,
    change_function,
    change_merge,
    insert_step,
    remove_step,
    swap_steps,
    unwrap,
    wrap_in_loop,
    wrap_in_parallel,
)
from core.search.operators._mutate import OPERATORS, crossover, mutate, random_spec
from core.search.operators._structure import (
    accept_router,
    agent_cost_order,
    agreement_gate,
    bridge_specs,
    cascade_spec,
    complementarity,
    escalate_after,
    feature_conditions,
    feature_router_spec,
    gate_spec,
    k_vote,
    learned_router_spec,
    mix_specs,
    opening_specs,
    oracle_router_point,
    replace_branch,
    router_pairs,
    vote_spec,
)

__all__ = [
    "BUILTIN_MERGES",
    "OPERATORS",
    "ROLES",
    "MutationContext",
    "Operator",
    "add_cascade",
    "add_parallel_branch",
    "add_router",
    "change_agent",
    "change_condition",
    "change_function",
    "change_merge",
    "complementarity",
    "feature_conditions",
    "feature_router_spec",
    "router_pairs",
    "oracle_router_point",
    "accept_router",
    "agent_cost_order",
    "agreement_gate",
    "cascade_spec",
    "crossover",
    "escalate_after",
    "gate_spec",
    "k_vote",
    "learned_router_spec",
    "opening_specs",
    "replace_branch",
    "vote_spec",
    "insert_step",
    "is_valid_candidate",
    "mutate",
    "random_spec",
    "remove_step",
    "swap_steps",
    "unwrap",
    "wrap_in_loop",
    "wrap_in_parallel",
    "bridge_specs",
    "mix_specs",
]
