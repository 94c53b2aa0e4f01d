"""Applying a search result to where its topologies live: diff first, write only when asked.

`apply_result(result, target, dry_run=True)` returns one `GeneDiff` per gene (semantics section
8: `gene_name, before, after, unified, changed`, plus the structural diff and the base the diff
was made against) and writes only when `dry_run=False`. What is written is the full validated
spec, never a patch. Targets:

- **a mapping** (`{gene name: spec}`): each value is JSON text, a JSON-like dict or a spec model,
  and the written value keeps that type (text keeps its style: indented if it had newlines,
  compact if not; a `None` value becomes a spec model). A missing key is an `ApplyError`.
- **an object**: a gene name is a dotted attribute path (`"agents.router.spec"` is
  `target.agents.router.spec`), holding the same value types. Every gene must address its own
  attribute: two names that resolve onto one attribute (through aliases), or one inside the
  other's value, are a `ValueError` naming both. A missing attribute is an `ApplyError`.
- **a `TopologyRegistry`**: the gene name is the topology's name; a name not in the registry yet
  is created. Each write is atomic and checked against the version the diff was made against
  (`StaleTargetError`), and records the approval.

Staleness: with `expected=` (the diffs the user approved, from an earlier dry run), a write
refuses with `StaleTargetError` unless every gene's target still holds exactly what that diff
was made against (registry: the same version, checked atomically by the registry's write;
mapping and object: the same content, ids included) and the result still proposes the same spec.
Without `expected`, the diff made inside the call is the base. Nothing is written unless every
gene passes its checks; a mapping or object whose assignment fails part-way is restored.
Unchanged genes are never written.

Learned routers (`core.search.learned`): a spec may route on learned conditions
(`learned_<digest>`), whose artefacts are data the spec does not carry. Writing to a
`TopologyRegistry`, every artefact the spec names is written first into `learned/` beside the
name's spec files (`<root>/<name>/learned/<digest>.json`, `write_artefacts`), taken from
`artefacts=` (default: the result's `raw["learned"]`); one that is not there refuses the write
(`ApplyError` naming it) before anything is written. `TopologyRegistry.load(name, callables)`
reads the spec back with them registered. A mapping or object target has no folder: nothing is
written for them there (keep `raw["learned"]` with it).

Prompt results (phase 2, `core.optimization.OptimizationRunner`: `best_decoded` maps
`"<agent>.system_prompt"` genes to texts) are applied to the one topology they were evolved on,
`topology=` (the target's key, attribute path or registry name; inferred when the target holds
exactly one topology): the texts become the `system_prompt`s of that topology's inline
`AgentSpec`s (`core.search.prompt_diff.with_prompts`; a registered agent is refused by name), and
the result is one `GeneDiff` for the topology whose `prompts` hold each prompt's word-level diff,
written (or not) exactly as a topology result's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict

from core.combinators.learned import LearnedCondition
from core.errors import ApplyError, SpecError, StaleTargetError
from core.ir import TopologySpec, parse_topology
from core.ir.diff import NodeChange, structural_diff, unified_json_diff
from core.ir.models import NODE_TYPES
from core.search.learned import artefacts_named, learned_names, write_beside
from core.search.prompt_diff import PromptDiff, with_prompts
from core.search.registry import Approval, TopologyRegistry
from core.search.result import OptimizationResult

__all__ = ["GeneDiff", "apply_result", "apply_specs"]


class GeneDiff(BaseModel):
    """The difference one gene's new spec makes to its target, and whether it was written."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    gene_name: str
    """The gene (mapping key, dotted attribute path, or registry name)."""
    before: TopologySpec | None
    """The target's current spec; None when a registry does not have the name yet."""
    after: TopologySpec
    """The spec the result proposes (what a write stores, in full)."""
    unified: str
    """Unified diff of the two specs' pretty, sorted-key JSON (`""` when equal)."""
    changed: bool
    """True when `after` differs from `before` in any field, node ids included."""
    structural: tuple[NodeChange, ...] = ()
    """Nodes added, removed and changed, matched by id (`core.ir.diff.structural_diff`)."""
    base_version: int | None = None
    """Registry targets: the version the diff was made against (None: a new name)."""
    base_hash: str | None = None
    """sha256 of `before`'s JSON with ids (None when there is no `before`): the content a write
    with `expected=` checks the target still has."""
    after_hash: str
    """sha256 of `after`'s JSON with ids."""
    written: bool = False
    """True when this call wrote the gene (never in a dry run, never when unchanged)."""
    new_version: int | None = None
    """Registry targets: the version the write created."""
    prompts: tuple[PromptDiff, ...] = ()
    """Prompt results: one word-level diff per prompt gene, in the result's order (`unified`
    shows the same change in the spec's JSON); empty for a topology result."""


def _content_hash(spec: TopologySpec) -> str:
    """sha256 of the spec's sorted-key JSON, ids and defaults included."""
    text = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


ValueStyle = Literal["text", "text_compact", "mapping", "model"]


def _read_value(gene: str, value: Any) -> tuple[TopologySpec | None, ValueStyle]:
    """The spec a mapping or attribute value holds, and the style to write it back in."""
    try:
        if value is None:
            return None, "model"
        if isinstance(value, str):
            style: ValueStyle = "text" if "\n" in value.strip() else "text_compact"
            return parse_topology(value), style
        if isinstance(value, NODE_TYPES):
            return parse_topology(value), "model"
        if isinstance(value, Mapping):
            return parse_topology(cast(Mapping[str, Any], value)), "mapping"
    except SpecError as exc:
        raise ApplyError(
            f"gene {gene!r}: the target's current value is not a valid spec: {exc}"
        ) from exc
    raise ApplyError(
        f"gene {gene!r}: the target holds a {type(value).__name__}; expected JSON text, a "
        "JSON-like dict or a topology spec"
    )


def _render(spec: TopologySpec, style: ValueStyle) -> Any:
    if style == "text":
        return spec.model_dump_json(indent=2)
    if style == "text_compact":
        return spec.model_dump_json()
    if style == "mapping":
        return spec.model_dump(mode="json")
    return spec


@dataclass
class _Slot:
    """Where one gene lives in a mapping or object target."""

    gene: str
    holder: Any
    key: str
    is_item: bool
    value: Any
    chain: tuple[int, ...]

    def get(self) -> Any:
        return self.holder[self.key] if self.is_item else getattr(self.holder, self.key)

    def set(self, value: Any) -> None:
        if self.is_item:
            self.holder[self.key] = value
        else:
            setattr(self.holder, self.key, value)


def _mapping_slot(target: Mapping[str, Any], gene: str) -> _Slot:
    if gene not in target:
        known = ", ".join(repr(k) for k in list(target)[:20]) or "(none)"
        raise ApplyError(f"gene {gene!r}: the target mapping has no such key (keys: {known})")
    return _Slot(gene, target, gene, True, target[gene], (id(target),))


def _object_slot(target: object, gene: str) -> _Slot:
    parts = gene.split(".")
    if any(not p.isidentifier() for p in parts):
        raise ValueError(f"gene name {gene!r} is not a dotted attribute path (like 'a.b.c')")
    holder: Any = target
    chain = [id(target)]
    for i, part in enumerate(parts[:-1]):
        try:
            holder = getattr(holder, part)
        except AttributeError:
            where = ".".join(parts[: i + 1])
            raise ApplyError(f"gene {gene!r}: the target has no attribute {where!r}") from None
        chain.append(id(holder))
    try:
        value = getattr(holder, parts[-1])
    except AttributeError:
        raise ApplyError(f"gene {gene!r}: the target has no attribute {gene!r}") from None
    return _Slot(gene, holder, parts[-1], False, value, tuple(chain))


def _check_collisions(slots: Sequence[_Slot]) -> None:
    """Two genes on one attribute, or one gene inside another's value: `ValueError`."""
    for i, a in enumerate(slots):
        for b in slots[i + 1 :]:
            if a.holder is b.holder and a.key == b.key:
                raise ValueError(
                    f"gene names {a.gene!r} and {b.gene!r} resolve onto one attribute "
                    f"({type(a.holder).__name__}.{a.key}); each gene needs its own"
                )
            for outer, inner in ((a, b), (b, a)):
                if outer.value is not None and id(outer.value) in inner.chain[1:]:
                    raise ValueError(
                        f"gene names {outer.gene!r} and {inner.gene!r} overlap: "
                        f"{inner.gene!r} lives inside the value of {outer.gene!r}"
                    )


def _make_diff(
    gene: str,
    before: TopologySpec | None,
    after: TopologySpec,
    base_version: int | None = None,
) -> GeneDiff:
    base_hash = None if before is None else _content_hash(before)
    after_hash = _content_hash(after)
    return GeneDiff(
        gene_name=gene,
        before=before,
        after=after,
        unified=unified_json_diff(
            before, after, fromfile=f"{gene} (current)", tofile=f"{gene} (new)"
        ),
        changed=base_hash != after_hash,
        structural=tuple(structural_diff(before, after)),
        base_version=base_version,
        base_hash=base_hash,
        after_hash=after_hash,
    )


def _check_expected(diffs: Sequence[GeneDiff], expected: Sequence[GeneDiff]) -> None:
    by_gene = {d.gene_name: d for d in expected}
    if set(by_gene) != {d.gene_name for d in diffs}:
        raise ApplyError(
            f"the approved diffs cover genes {sorted(by_gene)}, the result "
            f"{sorted(d.gene_name for d in diffs)}; make the diff again"
        )
    for d in diffs:
        e = by_gene[d.gene_name]
        if e.after_hash != d.after_hash:
            raise ApplyError(
                f"gene {d.gene_name!r}: the spec to write is not the one in the approved diff"
            )
        if e.base_hash != d.base_hash or e.base_version != d.base_version:
            raise StaleTargetError(
                f"gene {d.gene_name!r}: the target changed since the diff was made; nothing was "
                "written (make the diff again)"
            )


def _result_specs(result: OptimizationResult) -> dict[str, TopologySpec]:
    specs: dict[str, TopologySpec] = {}
    for gene, value in result.best_decoded.items():
        if isinstance(value, str | float | int):
            raise ApplyError(
                f"gene {gene!r}: the result holds a number, not a topology or a prompt; only "
                "prompt genes and topologies can be applied"
            )
        specs[gene] = value
    for gene, text in result.best_candidate.items():
        if gene not in specs:
            try:
                specs[gene] = parse_topology(text)
            except SpecError as exc:
                raise ApplyError(f"gene {gene!r}: the result's spec is not valid: {exc}") from exc
    return specs


def _is_prompt_result(result: OptimizationResult) -> bool:
    return any(isinstance(v, str) for v in result.best_decoded.values())


def _current_topology(target: Any, topology: str | None) -> tuple[str, TopologySpec]:
    """The name and current spec of the topology a prompt result applies to."""
    if topology is None:
        if isinstance(target, TopologyRegistry):
            names = target.names()
        elif isinstance(target, Mapping):
            names = [str(k) for k in cast(Mapping[str, Any], target)]
        else:
            names = []
        if len(names) != 1:
            held = f" (the target holds: {', '.join(names)})" if names else ""
            raise ApplyError(
                "a prompt result applies to the one topology its prompts were evolved on: "
                f"give topology=NAME{held}"
            )
        topology = names[0]
    if isinstance(target, TopologyRegistry):
        if target.current_version(topology) is None:
            raise ApplyError(f"topology {topology!r} is not in the registry")
        return topology, target.current(topology)[1]
    if isinstance(target, Mapping):
        slot = _mapping_slot(cast(Mapping[str, Any], target), topology)
    else:
        slot = _object_slot(target, topology)
    spec, _ = _read_value(topology, slot.value)
    if spec is None:
        raise ApplyError(f"topology {topology!r}: the target holds no spec to apply prompts to")
    return topology, spec


def _apply_prompts(
    result: OptimizationResult,
    target: Any,
    dry_run: bool,
    topology: str | None,
    **options: Any,
) -> list[GeneDiff]:
    numbers = [g for g, v in result.best_decoded.items() if not isinstance(v, str)]
    if numbers:
        raise ApplyError(
            f"genes {numbers}: a prompt result's other genes (numbers, categories) have no place "
            "in a topology; only its prompt genes can be applied"
        )
    prompts = {g: str(v) for g, v in result.best_decoded.items()}
    name, current = _current_topology(target, topology)
    approved: Sequence[GeneDiff] | None = options.get("expected")
    if not dry_run and approved is not None:
        # the spec to write is made from the target's current one: a moved target is stale
        for d in approved:
            if d.gene_name == name and d.base_hash != _content_hash(current):
                raise StaleTargetError(
                    f"gene {name!r}: the target changed since the diff was made; nothing was "
                    "written (make the diff again)"
                )
    new_spec, prompt_diffs = with_prompts(name, current, prompts)
    diffs = apply_specs({name: new_spec}, target, dry_run, **options)
    return [d.model_copy(update={"prompts": tuple(prompt_diffs)}) for d in diffs]


def apply_result(
    result: OptimizationResult,
    target: Any,
    dry_run: bool = True,
    *,
    expected: Sequence[GeneDiff] | None = None,
    approval: Approval | None = None,
    note: str = "",
    topology: str | None = None,
    artefacts: Mapping[str, LearnedCondition] | None = None,
) -> list[GeneDiff]:
    """Diff a result's winning topologies against `target` and, unless `dry_run`, write them.

    Args:
        result: the search's result; its `best_decoded` specs (gene name -> spec) are applied;
            or a prompt result (gene name -> prompt text), applied into `topology`.
        target: a mapping, an object or a `TopologyRegistry` (see the module docstring).
        dry_run: True (the default) only diffs: the target is never modified.
        expected: the diffs an earlier dry run showed and the user approved; the write refuses
            if the target or the result moved since (see the module docstring).
        approval: who approved (recorded by a registry with the version it writes).
        note: where the specs came from, recorded by a registry (e.g. `"run 3f2a"`).
        topology: prompt results only: the target's name for the topology the prompts were
            evolved on (default: the target's only topology).
        artefacts: registered name -> learned artefact, for the learned conditions a spec
            names (default: the result's `raw["learned"]`; module docstring).

    Returns:
        One `GeneDiff` per gene, in the result's gene order; for a prompt result, one for
        `topology`, its `prompts` holding each prompt's word-level diff.

    Raises:
        ApplyError: a gene's place is missing in the target, holds something that is not a
            spec, or cannot be assigned (a mapping or object is then restored); prompt results:
            no `topology` and not exactly one in the target, a prompt for a registered agent or
            an agent the topology does not run (named), or genes that are not prompts.
        StaleTargetError: the target changed since the diff was made; nothing was written.
        ValueError: two gene names resolve onto one attribute of an object target.
    """
    if artefacts is None:
        artefacts = cast(Mapping[str, LearnedCondition], result.raw.get("learned", {}))
    if _is_prompt_result(result):
        return _apply_prompts(
            result,
            target,
            dry_run,
            topology,
            expected=expected,
            approval=approval,
            note=note,
            artefacts=artefacts,
        )
    return apply_specs(
        _result_specs(result),
        target,
        dry_run,
        expected=expected,
        approval=approval,
        note=note,
        artefacts=artefacts,
    )


def apply_specs(
    specs: Mapping[str, TopologySpec],
    target: Any,
    dry_run: bool = True,
    *,
    expected: Sequence[GeneDiff] | None = None,
    approval: Approval | None = None,
    note: str = "",
    records: Mapping[str, Mapping[str, Any]] | None = None,
    artefacts: Mapping[str, LearnedCondition] | None = None,
) -> list[GeneDiff]:
    """`apply_result` for any gene name -> spec mapping (e.g. one candidate of a stored run).

    Same arguments, return value and errors as `apply_result` (`artefacts` default: none), plus
    `records`: registry
    targets only, gene name -> the caller's record of that write (e.g. the run store's
    proposal and approval), journaled with it (`TopologyRegistry.write(record=...)`): the
    caller `settle`s it once stored, and a killed caller's record comes back from
    `TopologyRegistry.recover()`.
    """
    if isinstance(target, TopologyRegistry):
        return _apply_registry(
            specs, target, dry_run, expected, approval, note, records or {}, artefacts or {}
        )
    if isinstance(target, Mapping):
        mapping = cast(Mapping[str, Any], target)
        slots = [_mapping_slot(mapping, gene) for gene in specs]
    else:
        slots = [_object_slot(target, gene) for gene in specs]
        _check_collisions(slots)
    read = [(s, *_read_value(s.gene, s.value)) for s in slots]
    diffs = [_make_diff(s.gene, before, specs[s.gene]) for s, before, _ in read]
    if dry_run:
        return diffs
    if expected is not None:
        _check_expected(diffs, expected)
    # all-or-nothing: the slots still hold what was read (no await, no callback in between)
    done: list[tuple[_Slot, Any]] = []
    out: list[GeneDiff] = []
    try:
        for (slot, _before, style), d in zip(read, diffs, strict=True):
            if d.changed:
                slot.set(_render(d.after, style))
                done.append((slot, slot.value))
            out.append(d.model_copy(update={"written": d.changed}))
    except Exception as exc:
        for slot, old in reversed(done):
            try:
                slot.set(old)
            except Exception:  # noqa: BLE001, S112 (best effort: report the original failure)
                continue
        if isinstance(target, MutableMapping) or not isinstance(target, Mapping):
            raise ApplyError(f"could not assign to the target: {exc}") from exc
        raise ApplyError(f"the target mapping is read-only: {exc}") from exc
    return out


def _apply_registry(
    specs: Mapping[str, TopologySpec],
    registry: TopologyRegistry,
    dry_run: bool,
    expected: Sequence[GeneDiff] | None,
    approval: Approval | None,
    note: str,
    records: Mapping[str, Mapping[str, Any]],
    artefacts: Mapping[str, LearnedCondition],
) -> list[GeneDiff]:
    diffs: list[GeneDiff] = []
    for gene, after in specs.items():
        version = registry.current_version(gene)
        before = None if version is None else registry.get(gene, version)
        diffs.append(_make_diff(gene, before, after, base_version=version))
    if dry_run:
        return diffs
    if expected is not None:
        _check_expected(diffs, expected)
    learned = {d.gene_name: _learned_of(d, artefacts) for d in diffs if d.changed}
    out: list[GeneDiff] = []
    for d in diffs:
        if not d.changed:
            out.append(d)
            continue
        if learned[d.gene_name]:  # before the version: a reader of it finds them
            try:
                write_beside(registry.folder(d.gene_name), learned[d.gene_name])
            except OSError as exc:
                raise ApplyError(f"cannot write registry {registry.root}: {exc}") from exc
        # the registry re-checks the base under its lock: a writer in between is refused
        rec = registry.write(
            d.gene_name,
            d.after,
            d.base_version,
            approval=approval,
            note=note,
            record=records.get(d.gene_name),
        )
        out.append(d.model_copy(update={"written": True, "new_version": rec.version}))
    return out


def _learned_of(d: GeneDiff, artefacts: Mapping[str, LearnedCondition]) -> list[LearnedCondition]:
    """The artefacts of the learned conditions `d.after` names.

    Raises:
        ApplyError: one is not in `artefacts` (nothing is written).
    """
    try:
        return artefacts_named(learned_names(d.after), artefacts)
    except KeyError as exc:
        raise ApplyError(
            f"gene {d.gene_name!r}: the spec routes on learned conditions whose artefacts were "
            f"not given ({exc.args[0]}); apply it from its run (the result's raw['learned'], "
            "or the run's journal); nothing was written"
        ) from None
