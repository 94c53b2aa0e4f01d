"""Graphviz DOT rendering of a spec (for the studio's `st.graphviz_chart` and diffs).

One DOT node per spec node (so the graph's node count is the spec's `n_nodes`), with synthetic
DOT ids `n0, n1, ...` in document order (the order of `iter_nodes`); the spec node's `id` (if any) is kept as the DOT node's
`tooltip`. Every composite also draws a dashed cluster around itself and its sub-tree. Edges:

- pipeline: the pipeline node to its first step, then step to step in order ("1", "2", ...);
- parallel: fan-out from the parallel node to every branch, and fan-in from every branch back to
  it (dotted, labelled with the merge strategy, not constraining the layout);
- router: one edge per route labelled with the route name (and `if <condition>`), the fallback
  edge dashed and labelled "fallback"; the classifier is named in the router's label;
- refinement loop: the loop node to its step, and a dashed back-edge from the step to the loop
  labelled with the evaluator and the iteration cap.

Labels are escaped for DOT quoted strings: backslashes, double quotes, newlines (as `\\n`), and
the record-label characters `<>{}|` (backslash-escaped).
"""

from __future__ import annotations

from collections.abc import Mapping

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

__all__ = ["dot_escape", "to_dot"]

_SHAPES: dict[str, tuple[str, str]] = {
    # kind: (shape, fill colour)
    "agent_step": ("box", "#dbeafe"),
    "function_step": ("note", "#f3f4f6"),
    "pipeline": ("cds", "#fef3c7"),
    "parallel": ("trapezium", "#dcfce7"),
    "router": ("diamond", "#fce7f3"),
    "refinement_loop": ("octagon", "#ede9fe"),
}


def dot_escape(text: str) -> str:
    """Escape `text` for the inside of a DOT double-quoted string (see the module docstring)."""
    out: list[str] = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            continue
        elif ch in "<>{}|":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _agent_ref(ref: AgentSpec | str) -> str:
    if isinstance(ref, AgentSpec):
        return ref.name
    return ref


def _label(node: AnyNode) -> str:
    head = f"{node.node_kind}" if node.id is None else f"{node.node_kind} [{node.id}]"
    if isinstance(node, AgentStepSpec):
        if node.agent_name is not None:
            body = f"agent: {node.agent_name}"
        else:
            inline = node.inline_spec
            body = "inline agent" if inline is None else f"inline agent: {_agent_ref(inline)}"
    elif isinstance(node, FunctionStepSpec):
        body = f"fn: {node.callable_name}"
        if node.name:
            body += f"\nname: {node.name}"
    elif isinstance(node, PipelineSpec):
        n = len(node.steps)
        body = f"{n} step" if n == 1 else f"{n} steps"
    elif isinstance(node, ParallelSpec):
        body = f"merge: {node.merge}"
        if node.timeout is not None:
            body += f"\ntimeout: {node.timeout:g} s"
    elif isinstance(node, RouterSpec):
        clf = "none (route conditions)" if node.classifier is None else _agent_ref(node.classifier)
        body = f"classifier: {clf}"
    else:
        body = f"max {node.max_iterations} iterations"
    name = getattr(node, "name", None)
    if isinstance(node, PipelineSpec | ParallelSpec | RouterSpec | RefinementLoopSpec) and (
        name != node.node_kind
    ):
        head += f"\n{name}"
    return f"{head}\n{body}"


def to_dot(
    spec: AnyNode, *, highlight: Mapping[str, str] | None = None, title: str | None = None
) -> str:
    """Render `spec` as a DOT digraph (plain string building; iterative, any depth).

    Args:
        spec: the topology (or any node).
        highlight: spec node id -> colour (any Graphviz colour, e.g. `"#2ca02c"` or `"red"`);
            those nodes are filled with it and get a thick border. Nodes without an id cannot
            be highlighted (give them ids with `assign_ids`).
        title: a graph label shown on top.

    Returns:
        The DOT text, `digraph topology { ... }`.
    """
    colours = dict(highlight or {})
    lines: list[str] = [
        "digraph topology {",
        '  graph [rankdir=TB, fontname="Helvetica", compound=true];',
        '  node [fontname="Helvetica", fontsize=11, style="filled,rounded"];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    if title is not None:
        lines.append(f'  label="{dot_escape(title)}"; labelloc=t;')
    edges: list[str] = []
    dot_ids = {path: f"n{i}" for i, (path, _) in enumerate(walk(spec))}
    cluster = 0
    # stack items: (node, its path, indent), or (None, "", indent) to close a cluster
    stack: list[tuple[AnyNode | None, str, int]] = [(spec, "$", 1)]
    while stack:
        node, path, indent = stack.pop()
        pad = "  " * indent
        if node is None:
            lines.append(pad + "}")
            continue
        dot_id = dot_ids[path]
        shape, fill = _SHAPES[node.node_kind]
        attrs = [f'label="{dot_escape(_label(node))}"', f"shape={shape}"]
        colour = colours.get(node.id) if node.id is not None else None
        attrs.append(f'fillcolor="{dot_escape(colour or fill)}"')
        if colour is not None:
            attrs.append(f'color="{dot_escape(colour)}"')
            attrs.append("penwidth=3")
        if node.id is not None:
            attrs.append(f'tooltip="{dot_escape(node.id)}"')
        slots = child_slots(node)
        if not slots:
            lines.append(f"{pad}{dot_id} [{', '.join(attrs)}];")
            continue
        cluster += 1
        lines.append(f"{pad}subgraph cluster_{cluster} {{")
        inner = pad + "  "
        lines.append(f'{inner}label=""; style=dashed; color="#9ca3af";')
        lines.append(f"{inner}{dot_id} [{', '.join(attrs)}];")
        child_ids = [dot_ids[path + suffix] for suffix, _ in slots]
        edges.extend(_edges(node, dot_id, child_ids))
        stack.append((None, "", indent))
        for suffix, child in reversed(slots):
            stack.append((child, path + suffix, indent + 1))
    lines.extend(edges)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _edge(src: str, dst: str, **attrs: str) -> str:
    if not attrs:
        return f"  {src} -> {dst};"
    body = ", ".join(f"{k}={v}" for k, v in attrs.items())
    return f"  {src} -> {dst} [{body}];"


def _edges(node: AnyNode, me: str, kids: list[str]) -> list[str]:
    out: list[str] = []
    if isinstance(node, PipelineSpec):
        out.append(_edge(me, kids[0], label='"1"'))
        for i in range(1, len(kids)):
            out.append(_edge(kids[i - 1], kids[i], label=f'"{i + 1}"'))
    elif isinstance(node, ParallelSpec):
        merge = dot_escape(node.merge)
        for kid in kids:
            out.append(_edge(me, kid, style="bold"))
        for kid in kids:
            out.append(
                _edge(kid, me, style="dotted", constraint="false", label=f'"merge: {merge}"')
            )
    elif isinstance(node, RouterSpec):
        for route, kid in zip(node.routes, kids, strict=False):
            text = route.name
            if route.condition_name is not None:
                text += f"\nif {route.condition_name}"
            out.append(_edge(me, kid, label=f'"{dot_escape(text)}"'))
        if node.fallback_step is not None:
            out.append(_edge(me, kids[-1], style="dashed", label='"fallback"'))
    elif isinstance(node, RefinementLoopSpec):
        evaluator = dot_escape(_agent_ref(node.evaluator))
        out.append(_edge(me, kids[0], label='"step"'))
        out.append(
            _edge(
                kids[0],
                me,
                style="dashed",
                constraint="false",
                label=f'"evaluate: {evaluator}\\nmax {node.max_iterations}"',
            )
        )
    return out
