"""Deep links: the live page's state in the URL's query parameters, and back.

`?run=<run id>&candidate=<idx>&x=<objective>&y=<objective>` opens the live page on that run
with that candidate in the inspector and those axes. Unknown or malformed values are dropped
(a link never breaks the page).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "COMPARE_MAX",
    "CompareSelection",
    "LiveLink",
    "TablePick",
    "compare_selection",
    "parse_live_link",
    "table_pick",
]


@dataclass(frozen=True, slots=True)
class LiveLink:
    """The live page's linkable state.

    Attributes:
        run: the run id, or None.
        candidate: the inspected candidate, or None.
        x: the X objective, or None.
        y: the Y objective, or None.
    """

    run: str | None = None
    candidate: int | None = None
    x: str | None = None
    y: str | None = None

    def to_params(self) -> dict[str, str]:
        """The query parameters for this state (unset ones left out)."""
        out: dict[str, str] = {}
        if self.run:
            out["run"] = self.run
        if self.candidate is not None:
            out["candidate"] = str(self.candidate)
        if self.x:
            out["x"] = self.x
        if self.y:
            out["y"] = self.y
        return out


def _first(value: str | Sequence[str] | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    return _first(value[0]) if value else None


def parse_live_link(
    params: Mapping[str, str | Sequence[str]],
    *,
    runs: Sequence[str] = (),
    objectives: Sequence[str] = (),
) -> LiveLink:
    """Read the live page's state from query parameters.

    Args:
        params: `st.query_params` (or any mapping of name -> value or values).
        runs: the known run ids; a `run` not among them is dropped (empty: accept any).
        objectives: the allowed axis names; other `x` / `y` values are dropped.
    """
    run = _first(params.get("run"))
    if run is not None and runs and run not in runs:
        run = None
    cand_text = _first(params.get("candidate"))
    candidate = int(cand_text) if cand_text is not None and cand_text.isdigit() else None
    x = _first(params.get("x"))
    y = _first(params.get("y"))
    if x is not None and x not in objectives:
        x = None
    if y is not None and y not in objectives:
        y = None
    return LiveLink(run=run, candidate=candidate, x=x, y=y)


COMPARE_MAX = 4
"""Compare shows two to four topologies."""


@dataclass(frozen=True, slots=True)
class CompareSelection:
    """Candidates selected on the live chart or in its archive table, as a Compare deep link.

    Attributes:
        items: the `items` query parameter of the Compare page, `"RUN:IDX,RUN:IDX,..."`
            (at most `COMPARE_MAX` candidates, in selection order).
        label: the link's text, e.g. `"Compare selected (3)"`.
        caption: what was selected and, past `COMPARE_MAX`, which ones are compared.
    """

    items: str
    label: str
    caption: str


def compare_selection(
    run_id: str, picked: Sequence[int], *, where: str = "on the chart"
) -> CompareSelection | None:
    """The Compare link for candidates selected on the chart (box, lasso or shift-click) or in
    the archive table (several rows).

    Args:
        run_id: the live page's run.
        picked: candidate indices in selection order (`selected_candidates`, or the table's
            selected rows as candidates), duplicates ignored.
        where: where they were selected, as the caption says it (`"on the chart"`, `"in the
            table"`).

    Returns:
        None with fewer than two distinct candidates (nothing to compare); else the link, the
        first `COMPARE_MAX` of them when more were selected.
    """
    distinct = list(dict.fromkeys(int(i) for i in picked))
    if len(distinct) < 2:
        return None
    used = distinct[:COMPARE_MAX]
    names = ", ".join(f"#{i}" for i in distinct)
    caption = f"Selected {where}: {names}."
    if len(distinct) > COMPARE_MAX:
        caption += (
            f" Compare shows at most {COMPARE_MAX}: the first {COMPARE_MAX} selected "
            f"({', '.join(f'#{i}' for i in used)})."
        )
    return CompareSelection(
        ",".join(f"{run_id}:{i}" for i in used), f"Compare selected ({len(used)})", caption
    )


@dataclass(frozen=True, slots=True)
class TablePick:
    """What a selection in the live page's archive table asks for.

    Attributes:
        inspect: the candidate to open in the inspector (one row selected, not the one
            inspected now), or None (keep the inspector as it is).
        compare: the Compare link when two or more rows are selected, else None.
    """

    inspect: int | None
    compare: CompareSelection | None


def table_pick(
    run_id: str, rows: Sequence[int], order: Sequence[int], inspected: int | None
) -> TablePick:
    """Read the archive table's multi-row selection ("Compare selected"
    from the Live page's table as from its chart).

    One selected row inspects its candidate; two or more keep the inspector on the candidate it
    shows and give a Compare link for the selected candidates, in the table's row order (the
    first `COMPARE_MAX`, as `compare_selection` says).

    Args:
        run_id: the live page's run.
        rows: the selected row positions (`st.dataframe`'s `selection.rows`); positions past
            the table's end (a refresh shortened it) are ignored.
        order: the candidate index of each row of the table as shown.
        inspected: the candidate the inspector shows now, or None.
    """
    picked = [int(order[r]) for r in sorted(set(rows)) if 0 <= r < len(order)]
    if len(picked) == 1:
        only = picked[0]
        return TablePick(None if only == inspected else only, None)
    return TablePick(None, compare_selection(run_id, picked, where="in the table"))
