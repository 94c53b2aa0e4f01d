"""What the command line prints about runs: the front table, the best topology, summaries.

Pure formatting over the store's DataFrames (`RunStore.archive`, `list_runs`) and specs, so
`search` and `show` print the same thing from the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from core.ir import TopologySpec
from core.ir.diff import NodeChange
from core.ir.metrics import spec_metrics
from core.ir.models import (
    AgentSpec,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    RefinementLoopSpec,
    RouterSpec,
)
from core.storage.queries import is_missing
from core.vocab.pareto import DEFAULT_OBJECTIVES, Objective
from studio.cli._output import Output, fmt_float

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ACCURACY_COST",
    "FRONT_COLUMNS",
    "TEST_FRONT_LABEL",
    "Table",
    "table_records",
    "front_legend",
    "front_table",
    "fmt_signed",
    "mean_gap",
    "more_on_the_full_front",
    "print_changes",
    "print_front",
    "print_front_noise",
    "print_spec",
    "print_test_front",
    "structure_line",
]

Table: TypeAlias = "pd.DataFrame | Sequence[Mapping[str, Any]]"
"""A table the report prints: a store's DataFrame, or its rows as dicts (`RunStore.archive_records`,
which the end-of-search report uses so pandas is never imported)."""

TEST_FRONT_LABEL: Final = "held-out test: reported only, never used for selection"
"""How every view of test scores is labelled."""


ACCURACY_COST: Final[tuple[Objective, ...]] = (
    Objective("accuracy", "max"),
    Objective("cost_usd", "min"),
)
"""The front `show` and `search` print first: what a reader weighs first is how often a
topology is right and what it costs, and over these two a fast, small, weak candidate (a
0.11-accuracy chain on an own problem) is not on it. The full front over
`DEFAULT_OBJECTIVES` is printed by `--objectives all`."""

_OBJECTIVE_WORDS = {"cost_usd": "cost", "latency_ms": "latency"}
"""How the legend names an objective (the archive's column name otherwise)."""


def _objective_words(objectives: Sequence[Objective]) -> str:
    """`accuracy and cost` for two objectives, `all of accuracy, cost, ... and depth` for more."""
    names = [_OBJECTIVE_WORDS.get(o.name, o.name) for o in objectives]
    if len(names) == 2:
        return f"both {names[0]} and {names[1]}"
    return "all of " + ", ".join(names[:-1]) + f" and {names[-1]}"


def more_on_the_full_front(shown: Table, full: Table) -> str:
    """The line under the (accuracy, cost) front saying how many more candidates the full
    front over all five objectives holds, e.g. `the front over all five objectives
    (accuracy, cost, latency, n_agents, depth) holds 9 more candidates: --objectives all
    lists them` (or `... holds no other candidate`); `shown` and `full` are the same split's
    archive under each set of objectives."""
    on_shown = {int(r["candidate_idx"]) for r in table_records(shown) if bool(r["on_front"])}
    on_full = {int(r["candidate_idx"]) for r in table_records(full) if bool(r["on_front"])}
    n = len(on_full - on_shown)
    names = ", ".join(o.name for o in DEFAULT_OBJECTIVES)
    head = f"the front over all five objectives ({names}) holds"
    if not n:
        return f"{head} no other candidate"
    return f"{head} {n} more candidate{'' if n == 1 else 's'}: --objectives all lists them"


def table_records(table: Table) -> list[dict[str, Any]]:
    """`table`'s rows as dicts, a missing value (NaN, NA, NaT) as None; a DataFrame is converted
    with its own `to_dict`, rows as dicts are copied, so this never imports pandas."""
    to_dict = getattr(table, "to_dict", None)
    rows: Sequence[Mapping[str, Any]] = (
        to_dict("records") if callable(to_dict) else table  # pyright: ignore[reportAssignmentType]
    )
    return [{str(k): None if is_missing(v) else v for k, v in row.items()} for row in rows]


FRONT_COLUMNS: tuple[str, ...] = (
    "candidate",
    "accuracy",
    "cost_usd",
    "latency_ms",
    "n_agents",
    "depth",
    "error_rate",
    "score",
    "operator",
    "same_as",
    "best",
)
"""The columns of the printed Pareto front (plain mode: two-space separated, one row a line).
`error_rate` is the share of the candidate's example runs that raised (its agents' or
functions' errors, timeouts), 4 decimals.
`same_as` lists the other front candidates with exactly the same printed figures (different
topologies that score alike, e.g. the seed with a no-op step inserted): they get no row."""

_SHORT = {
    "candidate": "#",
    "accuracy": "acc",
    "cost_usd": "cost $",
    "latency_ms": "lat ms",
    "n_agents": "agents",
    "error_rate": "errors",
    "operator": "made by",
    "same_as": "same as",
    "best": "*",
}


def _opt(value: Any) -> Any:
    return None if is_missing(value) else value


def _int(value: Any) -> str:
    v = _opt(value)
    return "-" if v is None else str(int(v))


def front_table(
    archive: Table, objectives: Sequence[Objective] = DEFAULT_OBJECTIVES
) -> list[list[str]]:
    """The rows of the printed front: the archive rows `on_front`, by candidate index, one row
    per point of the front over `objectives`.

    Give it an archive of one split (`RunStore.archive(run_id, split="validation")`): the
    front is only meaningful when every entry was scored on the same examples.

    Numbers are printed with fixed decimals: accuracy, error rate and score 4, cost 6 (USD per
    example), latency 1 (ms per example), so a reader can compare them with the store's values rounded
    the same way. Front candidates whose printed figures on `objectives` are equal are one
    point of that front and share one row (over all five objectives: every figure from accuracy
    to score; over accuracy and cost: those two, so different topologies that answer alike at
    one cost are one point): the best one if it is among them, else the smallest (fewest
    agents, then least depth, then lowest latency, then the earliest); the others are listed in
    `same_as` (`-` when none). `best` is `*` on the run's best entry.
    """
    records = [r for r in table_records(archive) if bool(r["on_front"])]
    records.sort(key=lambda r: int(r["candidate_idx"]))
    names = {o.name for o in objectives}
    groups: dict[tuple[str, ...], list[tuple[tuple[str, ...], dict[Any, Any]]]] = {}
    for rec in records:
        figures = (
            fmt_float(_opt(rec["accuracy"]), 4),
            fmt_float(_opt(rec["cost_usd"]), 6),
            fmt_float(_opt(rec["latency_ms"]), 1),
            _int(rec["n_agents"]),
            _int(rec["depth"]),
            fmt_float(_opt(rec.get("error_rate")), 4),
            fmt_float(_opt(rec["aggregate_score"]), 4),
        )
        key = (
            figures
            if names >= _FIVE
            else tuple(f for f, col in zip(figures, _FIGURE_COLUMNS, strict=True) if col in names)
        )
        groups.setdefault(key, []).append((figures, rec))
    rows: list[list[str]] = []
    for members in groups.values():
        figures, head = next(
            (m for m in members if bool(_opt(m[1]["is_best"]))),
            min(members, key=_smallest),
        )
        others = [_int(m["candidate_idx"]) for _, m in members if m is not head]
        rows.append(
            [
                _int(head["candidate_idx"]),
                *figures,
                str(_opt(head["operator"]) or "-").replace(" ", "_"),
                ",".join(others) or "-",
                "*" if bool(_opt(head["is_best"])) else "",
            ]
        )
    rows.sort(key=lambda row: int(row[0]))
    return rows


_FIGURE_COLUMNS: Final = (
    "accuracy",
    "cost_usd",
    "latency_ms",
    "n_agents",
    "depth",
    "error_rate",
    "aggregate_score",
)
"""The archive columns of a front row's figures, in `FRONT_COLUMNS` order."""
_FIVE: Final = frozenset(o.name for o in DEFAULT_OBJECTIVES)


def _smallest(member: tuple[tuple[str, ...], dict[Any, Any]]) -> tuple[float, ...]:
    """Order of the candidates of one front point: fewest agents, least depth, lowest
    latency, earliest (a missing figure last)."""
    rec = member[1]

    def num(col: str) -> float:
        v = _opt(rec.get(col))
        return math.inf if v is None else float(v)

    return (num("n_agents"), num("depth"), num("latency_ms"), float(rec["candidate_idx"]))


def front_legend(
    weights: Mapping[str, Any] | None,
    n_examples: int | None,
    split: str = "validation",
    *,
    objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
) -> str:
    """One line saying what the front's numbers mean: units, the score's formula, what puts a
    candidate on the front (dominance over `objectives`: over all five, a slower candidate with
    fewer agents can be on it) and the `same_as` column.

    e.g. `per problem, over the 300 validation problems: accuracy = share correct, cost_usd in
    USD, latency_ms in ms; score = 1*accuracy - 0.1*cost_usd - 1e-06*latency_ms (* = best
    score); on the front: ...`.
    """
    over = f"the {n_examples} {split} problems" if n_examples else f"the {split} split"
    text = f"per problem, over {over}: accuracy = share correct, cost_usd in USD, latency_ms in ms"
    if weights:
        terms: list[str] = []
        for name in ("accuracy", "cost_usd", "latency_ms"):
            w = weights.get(name)
            if isinstance(w, int | float) and w != 0:
                sign = "-" if w < 0 else "+"
                terms.append(f"{sign} {abs(w):g}*{name}")
        if terms:
            formula = " ".join(terms).removeprefix("+ ")
            text += f"; score = {formula}"
    return text + (
        " (* = best score); on the front: no other candidate is at least as good on "
        f"{_objective_words(objectives)} and better on one; same_as: front "
        f"candidates with the same {_same_words(objectives)}, not listed again"
    )


def _same_words(objectives: Sequence[Objective]) -> str:
    """What `same_as` candidates share: every figure over the five objectives, else the
    objectives' (`accuracy and cost`: the row shows the smallest of them)."""
    if {o.name for o in objectives} >= _FIVE:
        return "figures"
    names = [_OBJECTIVE_WORDS.get(o.name, o.name) for o in objectives]
    joined = " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + f" and {names[-1]}"
    return f"{joined} (the row shows the smallest)"


def _words(row: list[str]) -> list[str]:
    """A front row for a terminal: the operator and `same_as` with spaces to wrap at
    (`mutate:wrap_in_parallel` -> `mutate: wrap in parallel`, `3,5` -> `3, 5`)."""
    op, same = FRONT_COLUMNS.index("operator"), FRONT_COLUMNS.index("same_as")
    out = list(row)
    out[op] = out[op].replace(":", ": ").replace("_", " ")
    out[same] = out[same].replace(",", ", ")
    return out


def print_front(
    out: Output,
    archive: Table,
    *,
    title: str = "Pareto front",
    legend: str | None = None,
    more: str | None = None,
    objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
) -> None:
    """Print the front table (or a line saying it is empty), then `legend` and `more` (a line
    saying what the table leaves out, `more_on_the_full_front`) if given.

    `objectives`: what the front is drawn over (`front_table` groups its points by them).
    On a terminal the operator names are spelled with spaces (`mutate: wrap in parallel`) so
    a narrow terminal (80 columns) wraps them at word boundaries; plain output keeps
    `front_table`'s cells."""
    rows = front_table(archive, objectives)
    if out.rich:
        rows = [_words(row) for row in rows]
    if not rows:
        out.heading(title)
        out.line("(no valid candidate: the front is empty)")
        if more:
            out.line(more)
        return
    out.heading(title)
    out.table(
        FRONT_COLUMNS,
        rows,
        right=FRONT_COLUMNS[: FRONT_COLUMNS.index("operator")],  # the figures
        short=_SHORT,
    )
    if legend:
        out.line(f"({legend})")
    if more:
        out.line(more)


def _agent_ref(ref: AgentSpec | str | None) -> str:
    if ref is None:
        return "-"
    if isinstance(ref, AgentSpec):
        return ref.name
    return ref


def _node_text(node: AnyNode) -> str:
    """A compact one-line rendering of a node and its sub-tree (recursive: for display of
    specs that passed the IR's depth limit)."""
    if isinstance(node, AgentStepSpec):
        return node.agent_name or _agent_ref(node.inline_spec)
    if isinstance(node, FunctionStepSpec):
        return node.callable_name
    if isinstance(node, PipelineSpec):
        return " -> ".join(_wrap(e.operation) for e in node.steps)
    if isinstance(node, ParallelSpec):
        inner = " | ".join(_node_text(s) for s in node.steps)
        return f"[{inner}] merge={node.merge}"
    if isinstance(node, RouterSpec):
        routes = "; ".join(
            f"if {r.condition_name}: {_node_text(r.step)}"
            if r.condition_name
            else f"{r.name}: {_node_text(r.step)}"
            for r in node.routes
        )
        fallback = "" if node.fallback_step is None else f"; else: {_node_text(node.fallback_step)}"
        by = f" by {_agent_ref(node.classifier)}" if node.classifier is not None else ""
        return f"route{by}{{{routes}{fallback}}}"
    if isinstance(node, RefinementLoopSpec):
        return (
            f"loop({_node_text(node.step)}; eval={_agent_ref(node.evaluator)}, "
            f"max {node.max_iterations})"
        )
    return node.node_kind  # pragma: no cover


def _wrap(node: AnyNode) -> str:
    text = _node_text(node)
    return f"({text})" if isinstance(node, PipelineSpec) else text


def structure_line(spec: TopologySpec) -> str:
    """One line: the shape and the structural metrics, e.g.
    `pipeline: [6b_finetuning | 175b_finetuning] merge=majority_vote -> extract_answer
    (n_agents=2, depth=2, nodes=5)`."""
    m = spec_metrics(spec)
    return (
        f"{spec.node_kind}: {_node_text(spec)} "
        f"(n_agents={m.n_agents}, depth={m.depth}, nodes={m.n_nodes})"
    )


def print_spec(out: Output, spec: TopologySpec) -> None:
    """The spec's one-line summary and its JSON (defaults left out, ids kept)."""
    out.line(structure_line(spec))
    out.json(spec.model_dump(mode="json", exclude_defaults=True))


def print_changes(out: Output, changes: Sequence[NodeChange]) -> None:
    """The structural diff as a table: node, change, kind, paths, fields."""
    if not changes:
        out.line("(no structural change)")
        return
    out.table(
        ("node", "change", "kind", "before", "after", "fields"),
        [
            [
                c.node_id,
                c.change,
                c.kind,
                c.path_before or "-",
                c.path_after or "-",
                ",".join(c.fields_changed) or "-",
            ]
            for c in changes
        ],
    )


def print_test_front(out: Output, test_front: Table) -> None:
    """The validation front's candidates with their held-out test scores, labelled so a test
    score is never mistaken for what chose them (`TEST_FRONT_LABEL`)."""
    out.heading(f"Test front ({TEST_FRONT_LABEL})")
    rows = table_records(test_front)
    if not rows:
        out.line("(no validation front)")
        return
    scored = [r for r in rows if r["test_n_examples"]]
    if not scored:
        out.line("(not evaluated on the test split)")
        return
    # an unscored candidate at the validation point of a scored one is that point again
    # (`same_as` of the validation front): it gets no row of its own
    points = {(fmt_float(r["accuracy"], 4), fmt_float(r["cost_usd"], 6)) for r in scored}
    listed = [
        r
        for r in rows
        if r["test_n_examples"]
        or (fmt_float(r["accuracy"], 4), fmt_float(r["cost_usd"], 6)) not in points
    ]
    table: list[list[str]] = []
    for r in listed:
        tested = bool(r["test_n_examples"])
        table.append(
            [
                str(r["candidate_idx"]),
                fmt_float(r["accuracy"], 4),
                fmt_float(r["cost_usd"], 6),
                fmt_float(r["test_accuracy"], 4) if tested else "-",
                fmt_float(r["test_cost_usd"], 6) if tested else "-",
                fmt_float(r["test_latency_ms"], 1) if tested else "-",
                fmt_float(r["test_aggregate_score"], 4) if tested else "-",
                fmt_signed(r.get("val_minus_test_accuracy")) if tested else "-",
                ("*" if r["on_test_front"] else "") if tested else "not scored",
            ]
        )
    out.table(
        (
            "candidate",
            "val_accuracy",
            "val_cost_usd",
            "test_accuracy",
            "test_cost_usd",
            "test_latency_ms",
            "test_score",
            "val_minus_test",
            "test_front",
        ),
        table,
        right=(
            "candidate",
            "val_accuracy",
            "val_cost_usd",
            "test_accuracy",
            "test_cost_usd",
            "test_latency_ms",
            "test_score",
            "val_minus_test",
        ),
    )
    n = max(int(r["test_n_examples"]) for r in scored)
    hidden = len(rows) - len(listed)
    out.line(
        f"({len(scored)} of {len(rows)} validation-front candidates scored once on the {n} "
        "held-out test problems"
        + (
            f" ({hidden} unscored with the validation accuracy and cost of a scored one not listed)"
            if hidden
            else ""
        )
        + "; * = no other of them is at least as good on test on all objectives and better "
        "on one. The front and the best are chosen on validation only.)"
    )
    gap = mean_gap(scored)
    if gap is not None:
        out.line(
            f"mean validation - test accuracy over the {len(scored)} scored: {gap * 100:+.2f} "
            "points (positive: validation, where they were chosen, flattered them)"
        )


def print_front_noise(out: Output, noise: Table, accuracy: Mapping[int, float]) -> None:
    """The validation front's paired intervals (`studio.views.front_noise.front_noise_table`
    rows), cheapest first: each candidate's accuracy gain over its cheaper neighbour, its 95%
    interval, and `within noise` when that interval includes zero gain."""
    out.heading("Front noise (validation, paired bootstrap: 1,000 resamples, seed 0, 95%)")
    rows = table_records(noise)
    if not rows:
        out.line("(no validation front)")
        return
    table: list[list[str]] = []
    for r in rows:
        idx = int(r["candidate_idx"])
        cheaper = r["cheaper_idx"]
        table.append(
            [
                str(idx),
                fmt_float(accuracy.get(idx), 4),
                "-" if cheaper is None else str(int(cheaper)),
                fmt_signed(r["gain_vs_cheaper"]),
                "-"
                if r["gain_low"] is None
                else f"[{fmt_signed(r['gain_low'])}, {fmt_signed(r['gain_high'])}]",
                "within noise" if r["within_noise"] else "",
            ]
        )
    out.table(
        ("candidate", "val_accuracy", "vs_cheaper", "gain", "interval", "noise"),
        table,
        right=("candidate", "val_accuracy", "vs_cheaper", "gain"),
    )
    n = sum(bool(r["within_noise"]) for r in rows)
    out.line(
        f"({n} of {len(rows)} front candidates within noise: their gain in accuracy points over "
        "the next cheaper front candidate, on the same validation problems, could be zero)"
    )


def mean_gap(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """The mean `val_minus_test_accuracy` of the rows that have one (fractions of accuracy), or
    None when none has."""
    gaps = [
        float(g)
        for r in rows
        if (g := r.get("val_minus_test_accuracy")) is not None and not is_missing(g)
    ]
    return sum(gaps) / len(gaps) if gaps else None


def fmt_signed(value: Any) -> str:
    """A difference of accuracies (a fraction) as signed points with two decimals, e.g.
    `-1.33`; `-` when missing."""
    return "-" if value is None or is_missing(value) else f"{float(value) * 100:+.2f}"
