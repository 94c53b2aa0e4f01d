"""Constraint checks run on a parsed spec before anything runs (F4): depth and step kinds."""

from __future__ import annotations

from collections.abc import Iterable

from core.ir.models import ATOMIC_KINDS, COMPOSITE_KINDS, KINDS, AnyNode, walk

__all__ = ["check_allowed_kinds", "check_max_depth", "normalize_allowed_kinds"]


def normalize_allowed_kinds(kinds: Iterable[str] | None) -> tuple[str, ...] | None:
    """Validate an `allowed_step_kinds` option: known kind names, no duplicates, sorted by IR order.

    Raises:
        ValueError: a name is not an IR kind.
    """
    if kinds is None:
        return None
    names = tuple(kinds) if not isinstance(kinds, str) else (kinds,)
    unknown = sorted(set(names) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown step kind(s) {unknown}; the IR kinds are {list(KINDS)}")
    return tuple(k for k in KINDS if k in names)


def check_max_depth(depth: int, max_depth: int | None) -> str | None:
    """`"max_depth_exceeded: depth 5 > 4"` when `depth` exceeds `max_depth`, else None."""
    if max_depth is not None and depth > max_depth:
        return f"max_depth_exceeded: depth {depth} > {max_depth}"
    return None


def check_allowed_kinds(spec: AnyNode, allowed: tuple[str, ...] | None) -> str | None:
    """A `step_kind_not_allowed` reason naming every offending node and its JSON path, or None.

    Rule: atomic kinds (`agent_step`, `function_step`) must be in `allowed`. Composite kinds
    (`pipeline`, `parallel`, `router`, `refinement_loop`) are checked only when `allowed` names
    at least one composite kind; otherwise they are all allowed, which is what the default
    `TopologyGene.allowed_step_kinds = ("agent_step", "function_step")` means (a topology is
    always a composite). None allows everything.

    Example: `"step_kind_not_allowed: function_step at $.steps[1].operation (allowed:
    agent_step)"`.
    """
    if allowed is None:
        return None
    restrict_composites = any(k in COMPOSITE_KINDS for k in allowed)
    checked: set[str] = set(ATOMIC_KINDS)
    if restrict_composites:
        checked |= set(COMPOSITE_KINDS)
    bad = [
        f"{node.kind} at {path}"
        for path, node in walk(spec)
        if node.kind in checked and node.kind not in allowed
    ]
    if not bad:
        return None
    return f"step_kind_not_allowed: {'; '.join(bad)} (allowed: {', '.join(allowed) or 'none'})"
