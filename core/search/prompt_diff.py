"""Prompts into a topology: word-level prompt diffs and the spec with evolved prompts.

A prompt-evolution result (`core.optimization.OptimizationRunner`) maps prompt genes
(`"<agent>.system_prompt"`) to texts. Applying it (`core.search.apply.apply_result`) writes the
texts into the topology the prompts were evolved on:

- an agent the topology holds inline (an `AgentSpec` in an agent step, a router's classifier,
  a loop's evaluator) gets the text as its `system_prompt`;
- a registered agent (named by `agent_name`) keeps its prompt in its registry's code, not in the
  topology: applying a prompt to it is refused, naming the agent;
- an agent the topology does not run is refused too.

`word_diff(before, after)` is the review text: the words of `after`, with removed words as
`[-...-]` and added words as `{+...+}` (git's `--word-diff=plain` notation), whitespace
normalised to single spaces.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.agents.overrides import parse_prompt_target
from core.errors import ApplyError
from core.hydrate import agents_in
from core.ir import TopologySpec
from core.ir.models import AgentSpec

__all__ = ["PromptDiff", "with_prompts", "word_diff"]


class PromptDiff(BaseModel):
    """One prompt gene's change to one agent of the topology."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    gene_name: str
    """The prompt gene, e.g. `"critic.system_prompt"`."""
    agent: str
    """The agent whose prompt it is (the inline `AgentSpec`'s `name`)."""
    before: str
    """Its prompt in the target's topology now."""
    after: str
    """The evolved prompt (what a write stores)."""
    words: str
    """`word_diff(before, after)`; `""` when unchanged."""
    changed: bool
    """True when `after` differs from `before`."""


def word_diff(before: str, after: str) -> str:
    """Word-level diff: `after`'s words with `[-removed-]` and `{+added+}` runs; `""` when the
    two have the same words.

    e.g. `word_diff("Solve it.", "Solve it. Show the answer.")` is
    `"Solve it. {+Show the answer.+}"`.
    """
    old, new = before.split(), after.split()
    if old == new:
        return ""
    parts: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op == "equal":
            parts.append(" ".join(old[i1:i2]))
            continue
        if op in ("delete", "replace"):
            parts.append("[-" + " ".join(old[i1:i2]) + "-]")
        if op in ("insert", "replace"):
            parts.append("{+" + " ".join(new[j1:j2]) + "+}")
    return " ".join(parts)


def _inline(node: Any) -> dict[str, AgentSpec]:
    found: dict[str, AgentSpec] = {}
    if isinstance(node, AgentSpec):
        found[node.name] = node
    elif isinstance(node, BaseModel):
        for field in type(node).model_fields:
            found.update(_inline(getattr(node, field)))
    elif isinstance(node, list | tuple):
        for item in node:  # pyright: ignore[reportUnknownVariableType]
            found.update(_inline(item))
    return found


def _replaced(node: Any, prompts: Mapping[str, str]) -> Any:
    """`node` with every inline `AgentSpec` named in `prompts` given that prompt (copies along
    the way; untouched subtrees are shared)."""
    if isinstance(node, AgentSpec):
        if node.name in prompts and node.system_prompt != prompts[node.name]:
            return node.model_copy(update={"system_prompt": prompts[node.name]})
        return node
    if isinstance(node, BaseModel):
        updates: dict[str, Any] = {}
        for field in type(node).model_fields:
            value = getattr(node, field)
            new = _replaced(value, prompts)
            if new is not value:
                updates[field] = new
        return node.model_copy(update=updates) if updates else node
    if isinstance(node, list | tuple):
        items: list[Any] = list(node)  # pyright: ignore[reportUnknownArgumentType]
        new_items = [_replaced(item, prompts) for item in items]
        if all(a is b for a, b in zip(items, new_items, strict=True)):
            return node  # pyright: ignore[reportUnknownVariableType]
        rebuilt: list[Any] | tuple[Any, ...] = (
            new_items if isinstance(node, list) else tuple(new_items)
        )
        return rebuilt
    return node


def with_prompts(
    topology: str, spec: TopologySpec, prompts: Mapping[str, str]
) -> tuple[TopologySpec, list[PromptDiff]]:
    """`spec` with the evolved `prompts` (gene name -> text) in its inline agents, and one
    `PromptDiff` per gene, in `prompts`' order.

    Args:
        topology: the target's name for `spec`, for messages.
        spec: the topology the prompts were evolved on, as the target holds it now.
        prompts: `"<agent>.system_prompt"` -> the evolved text.

    Raises:
        ApplyError: a gene name that is not a prompt target; an agent `spec` does not run; a
            registered agent (its prompt lives in its registry, not in the topology). The
            message names the gene and the agent.
    """
    present = agents_in(spec)
    inline = _inline(spec)
    by_agent: dict[str, str] = {}
    diffs: list[PromptDiff] = []
    for gene, text in prompts.items():
        try:
            agent = parse_prompt_target(gene)[0]
        except ValueError as exc:
            raise ApplyError(f"gene {gene!r}: {exc}") from exc
        if agent not in inline:
            if agent in present:
                raise ApplyError(
                    f"gene {gene!r}: agent {agent!r} of topology {topology!r} is a registered "
                    "agent (agent_name): its prompt lives in its registry's code, not in the "
                    f"topology, so it cannot be applied here; set it where {agent!r} is "
                    "registered"
                )
            raise ApplyError(
                f"gene {gene!r}: topology {topology!r} runs no agent {agent!r} (its agents: "
                f"{', '.join(present) or '(none)'})"
            )
        before = inline[agent].system_prompt
        by_agent[agent] = text
        diffs.append(
            PromptDiff(
                gene_name=gene,
                agent=agent,
                before=before,
                after=text,
                words=word_diff(before, text) if before != text else "",
                changed=before != text,
            )
        )
    new_spec: TopologySpec = _replaced(spec, by_agent)
    return new_spec, diffs
