"""Applying a phase-2 (prompt) run: its topology part, its prompt part, or both, in one write.

`search --then-prompts` records phase 2 as its own run (`strategy="gepa"`,
`config.phase = "prompts"`, `config.parent_run_id` = the search's run id, `config.genes` = the
prompt genes, `"<agent>.system_prompt"`). Each of its candidates stores the winning topology the
prompts were evolved on (its spec, unchanged) and, as its `thought`, its prompt texts, one
`"<gene>: <text>"` entry a gene, in `config.genes`' order (a text may span lines).

A candidate of such a run is two changes to a registry topology:

- the **topology part**: the registry's current topology -> the search's winner (as it ran in
  phase 1, with its starting prompts);
- the **prompt part**: each prompt phase 2 changed (from candidate 0's, the starting prompts:
  `evolved_prompts`) written into its inline agent (`core.search.prompt_diff.with_prompts`; a
  registered agent is refused by name).

`plan_apply(...)` gives the one spec a write stores for the parts approved (`"both"`,
`"topology"` or `"prompts"`), with each prompt's word-level diff; the write itself is the usual
all-or-nothing, stale-checked `apply_specs`, so the parts are applied together or not at all.
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from core.errors import ApplyError
from core.ir import TopologySpec
from core.search.prompt_diff import PromptDiff, with_prompts

__all__ = [
    "PARTS",
    "PROMPT_STRATEGY",
    "Part",
    "PromptApplyPlan",
    "PromptRun",
    "candidate_prompts",
    "evolved_prompts",
    "part_label",
    "plan_apply",
    "prompt_run",
    "side_by_side",
    "stored_prompts",
]

PROMPT_STRATEGY = "gepa"
"""The `strategy` of a phase-2 run's `run_started`."""

Part = Literal["both", "topology", "prompts"]
PARTS: tuple[Part, ...] = ("both", "topology", "prompts")
"""What can be applied from a phase-2 candidate."""


@dataclass(frozen=True, slots=True)
class PromptRun:
    """A phase-2 run as its `run_started` records it.

    Attributes:
        run_id: the phase-2 run.
        parent_run_id: the topology search it followed (None when not recorded).
        genes: its prompt genes, e.g. `("critic.system_prompt",)`.
    """

    run_id: str
    parent_run_id: str | None
    genes: tuple[str, ...]


def prompt_run(run_id: str, strategy: str | None, config: Mapping[str, Any]) -> PromptRun | None:
    """The phase-2 run `run_id` is (from its stored `strategy` and `config`), or None when it is
    not one (any other strategy, or no prompt genes recorded)."""
    if strategy != PROMPT_STRATEGY or config.get("phase") != "prompts":
        return None
    genes = config.get("genes")
    if not isinstance(genes, list) or not genes:
        return None
    parent = config.get("parent_run_id")
    return PromptRun(
        run_id=run_id,
        parent_run_id=parent if isinstance(parent, str) else None,
        genes=tuple(str(g) for g in genes),  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    )


def candidate_prompts(thought: str, genes: Sequence[str]) -> dict[str, str]:
    """A phase-2 candidate's prompt texts (gene -> text) from its stored `thought`.

    The thought holds `"<gene>: <text>"` entries in `genes`' order, each starting a line; a
    text runs up to the next entry's line (so it may span lines).

    Raises:
        ValueError: an entry is missing or out of order (names the gene).
    """
    lines = thought.split("\n")
    starts: list[int] = []
    at = 0
    for gene in genes:
        prefix = f"{gene}: "
        found = next(
            (
                i
                for i in range(at, len(lines))
                if lines[i].startswith(prefix) or lines[i] == f"{gene}:"
            ),
            None,
        )
        if found is None:
            raise ValueError(f"the candidate's recorded prompts have no entry for {gene!r}")
        starts.append(found)
        at = found + 1
    prompts: dict[str, str] = {}
    for k, gene in enumerate(genes):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        first = lines[starts[k]][len(gene) + 2 :]
        prompts[gene] = "\n".join([first, *lines[starts[k] + 1 : end]])
    return prompts


@dataclass(frozen=True, slots=True)
class PromptApplyPlan:
    """What applying `part` of a phase-2 candidate writes.

    Attributes:
        part: `"both"`, `"topology"` or `"prompts"`.
        spec: the full spec a write stores as the registry topology.
        topology: the topology part's spec (the search's winner, its starting prompts).
        prompts: each prompt's word-level diff, in gene order: against the winner's prompt for
            `"both"`, against the registry's current one for `"prompts"` (only the prompts
            phase 2 changed); empty for `"topology"`.
    """

    part: Part
    spec: TopologySpec
    topology: TopologySpec
    prompts: tuple[PromptDiff, ...]


def plan_apply(
    name: str,
    winner: TopologySpec,
    current: TopologySpec | None,
    prompts: Mapping[str, str],
    part: Part = "both",
) -> PromptApplyPlan:
    """The spec to write for `part` of a phase-2 candidate, and its prompt diffs.

    Args:
        name: the registry topology (for messages).
        winner: the topology the prompts were evolved on (the candidate's stored spec).
        current: the registry's current spec of `name` (None: not there yet).
        prompts: gene -> evolved text (`candidate_prompts`).
        part: `"both"` (the winner with the evolved prompts), `"topology"` (the winner as
            it is) or `"prompts"` (the registry's current topology with the prompts phase 2
            changed, those that differ from the winner's; the others are left as they are).

    Raises:
        ApplyError: `"prompts"` with no current topology; a prompt for a registered agent or
            an agent the topology does not run (named, `with_prompts`); an unknown part.
    """
    if part == "topology":
        return PromptApplyPlan(part, winner, winner, ())
    if part == "both":
        spec, diffs = with_prompts(name, winner, prompts)
        return PromptApplyPlan(part, spec, winner, tuple(diffs))
    if part == "prompts":
        if current is None:
            raise ApplyError(
                f"the registry has no {name!r} to apply the prompts to: apply the topology part "
                "too (both)"
            )
        # only what phase 2 changed: a prompt it kept is no change to apply (and its agent
        # need not be in the registry's topology)
        _, evolved = with_prompts(name, winner, prompts)
        changed = {d.gene_name: prompts[d.gene_name] for d in evolved if d.changed}
        spec, diffs = with_prompts(name, current, changed)
        return PromptApplyPlan(part, spec, winner, tuple(diffs))
    raise ApplyError(f"unknown part {part!r}: one of {', '.join(PARTS)}")


def part_label(part: Part) -> str:
    """How an approval names the parts it applied, e.g. `"prompts only (topology rejected)"`."""
    return {
        "both": "topology and prompts",
        "topology": "topology only (prompts rejected)",
        "prompts": "prompts only (topology rejected)",
    }[part]


REMOVED_STYLE = "background:#ffd7d5;text-decoration:line-through"
ADDED_STYLE = "background:#ccf5d3"


def side_by_side(before: str, after: str) -> tuple[str, str]:
    """A prompt's word-level diff as two HTML texts, for two columns: `before` with its removed
    words marked (red, struck through), `after` with its added words marked (green).

    Words are compared as `word_diff` compares them (whitespace normalised to single spaces);
    every word is HTML-escaped. e.g. `side_by_side("Solve it.", "Solve it now.")` is
    `("Solve it.", 'Solve it. <span style="...">now.</span>')` (the `<span>` with
    `ADDED_STYLE`).
    """
    old, new = before.split(), after.split()
    left: list[str] = []
    right: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        a = html.escape(" ".join(old[i1:i2]))
        b = html.escape(" ".join(new[j1:j2]))
        if op == "equal":
            left.append(a)
            right.append(b)
            continue
        if a:
            left.append(f'<span style="{REMOVED_STYLE}">{a}</span>')
        if b:
            right.append(f'<span style="{ADDED_STYLE}">{b}</span>')
    return " ".join(left), " ".join(right)


class _RunReader(Protocol):
    def get_run(self, run_id: str) -> Any: ...

    def archive(self, run_id: str, *, include_unevaluated: bool = False) -> Any: ...


def stored_prompts(
    store: _RunReader, run_id: str | None, candidate_idx: int | None
) -> tuple[PromptRun, dict[str, str]] | None:
    """The phase-2 run a proposal came from and its candidate's prompt texts; None when the
    proposal is not from a phase-2 run (or from no run).

    Raises:
        ValueError: the candidate is not in the run, or its recorded prompts cannot be read.
    """
    if not isinstance(run_id, str) or candidate_idx is None:
        return None
    record = store.get_run(run_id)
    if record is None:
        return None
    run = prompt_run(run_id, record.strategy, record.config or {})
    if run is None:
        return None
    archive = store.archive(run_id, include_unevaluated=True)
    thoughts = {
        int(i): str(t or "")
        for i, t in zip(archive["candidate_idx"], archive["thought"], strict=True)
    }
    if int(candidate_idx) not in thoughts:
        raise ValueError(f"run {run_id} has no candidate {candidate_idx}")
    return run, evolved_prompts(thoughts, int(candidate_idx), run.genes)


def evolved_prompts(
    thoughts: Mapping[int, str], candidate_idx: int, genes: Sequence[str]
) -> dict[str, str]:
    """The prompts candidate `candidate_idx` changed: its texts (`candidate_prompts`) without
    those equal to candidate 0's (the starting prompts; all of them when candidate 0 is not
    recorded). A prompt phase 2 kept is no change to apply, and its agent may be a registered
    one, whose prompt cannot be written into a topology.

    Args:
        thoughts: candidate index -> its stored `thought`.
        candidate_idx: the candidate applied.
        genes: the run's prompt genes.

    Raises:
        ValueError: a candidate's recorded prompts cannot be read (names the gene).
    """
    texts = candidate_prompts(thoughts[candidate_idx], genes)
    if candidate_idx == 0 or 0 not in thoughts:
        return texts if candidate_idx != 0 else {}
    start = candidate_prompts(thoughts[0], genes)
    return {g: t for g, t in texts.items() if t != start[g]}
