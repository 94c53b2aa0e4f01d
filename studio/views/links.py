"""Deep links: the live page's state in the URL's query parameters, and back.

`?run=<run id>&candidate=<idx>&x=<objective>&y=<objective>` opens the live page on that run
with that candidate in the inspector and those axes. Unknown or malformed values are dropped
(a link never breaks the page).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["LiveLink", "parse_live_link"]


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
