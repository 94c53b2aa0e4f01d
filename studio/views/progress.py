"""A run's progress for the Live page: its phase (search, re-scoring,
held-out test, finished), the budget used and left, and an estimate of when the search ends.

Pure functions over what the run store gives (`RunRecord`, `RunStore.logs`,
`RunStore.progress`); they never query.

The phase comes from the engine's own log lines, which mark each step of the report
(`core.search._rescoring`): `re-scoring N candidate(s) on the full validation split`, then
`scoring N front candidate(s) on the held-out test split`. Before the first of them the run is
in its search; a run that no longer runs is finished, whatever it reached.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["BudgetLine", "RunProgress", "format_seconds", "run_progress"]

_RESCORING = re.compile(r"^re-scoring (\d+) candidate\(s\) on the full validation split")
_TEST = re.compile(r"^scoring (\d+) front candidate\(s\) on the held-out test split")


def format_seconds(s: float) -> str:
    """`"45 s"`, `"2 min 5 s"`, `"1 h 3 min"` (rounded to whole seconds)."""
    total = max(0, round(s))
    if total < 60:
        return f"{total} s"
    minutes, seconds = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


@dataclass(frozen=True)
class BudgetLine:
    """One limit of the run's budget: its name, what is used, the limit (None: no limit)."""

    name: str
    used: float
    limit: float | None

    @property
    def left(self) -> float | None:
        """What is left (never below 0), None without a limit."""
        return None if self.limit is None else max(0.0, self.limit - self.used)

    def text(self) -> str:
        """e.g. `"12 of 48 (36 left)"`, `"$225.64 of $20,000 ($19,774.36 left)"`, `"42 s of
        10 min (9 min 18 s left)"`, `"12 (no limit)"`."""
        fmt = {
            "evaluations": lambda v: f"{v:,.0f}",
            "USD": lambda v: f"${v:,.2f}",
            "wall time": format_seconds,
        }[self.name]
        if self.limit is None or self.left is None:
            return f"{fmt(self.used)} (no limit)"
        return f"{fmt(self.used)} of {fmt(self.limit)} ({fmt(self.left)} left)"


@dataclass(frozen=True)
class RunProgress:
    """What the Live page says about where a run is.

    Attributes:
        phase: `"search"`, `"re-scoring"`, `"test"` or `"finished"`.
        phase_text: one line, e.g. `"held-out test: 2 of 5 front candidates scored"`.
        budget: the evaluations, USD and wall-time lines.
        eta_text: when the current phase is expected to end, e.g. `"about 1 min 5 s"`, or
            `""` when the run is finished or there is nothing to go by yet.
    """

    phase: str
    phase_text: str
    budget: tuple[BudgetLine, ...] = field(default_factory=tuple[BudgetLine, ...])
    eta_text: str = ""


def run_progress(
    *,
    status: str,
    config: Mapping[str, Any],
    started_at: float | None,
    finished_at: float | None,
    cost_usd: float | None,
    logs: pd.DataFrame,
    results: pd.DataFrame,
    now: float,
) -> RunProgress:
    """A run's phase, budget used and left, and estimated end of the current phase.

    Args:
        status: the run's status (`running` while a process writes it; a studio's paused
            search is still `running` in the store).
        config: the run's recorded config (`RunRecord.config`: its `budget`).
        started_at, finished_at: the run's record.
        cost_usd: the run's cost so far (the Runs table's, `list_runs()["cost_usd"]`).
        logs: `RunStore.logs(run_id)` (`seq`, `ts`, `message`).
        results: `RunStore.progress(run_id)` (`candidate_idx`, `split`, `ts`): each candidate
            result; distinct candidates scored on a split other than `test` are the budget's
            evaluations (the seed counts one; a promotion is part of its evaluation).
        now: Unix seconds (the clock of a running run's elapsed time).
    """
    budget: Mapping[str, Any] = config.get("budget") or {}
    n_evals = (
        len(
            {
                int(i)
                for i, sp in zip(
                    results["candidate_idx"].tolist(), results["split"].tolist(), strict=True
                )
                if sp != "test"
            }
        )
        if not results.empty
        else 0
    )
    start = _num(started_at)
    end = _num(finished_at) if status != "running" else None
    elapsed = max(0.0, (end if end is not None else now) - start) if start is not None else 0.0
    used_usd = _num(cost_usd) or 0.0
    lines = (
        BudgetLine("evaluations", float(n_evals), _num(budget.get("max_evaluations"))),
        BudgetLine("USD", used_usd, _num(budget.get("max_usd"))),
        BudgetLine("wall time", elapsed, _num(budget.get("max_wall_s"))),
    )

    phase, total, since = "search", 0, None
    rows = (
        zip(logs["message"].tolist(), logs["ts"].tolist(), strict=True)
        if not logs.empty and "message" in logs.columns
        else iter(())
    )
    for msg, ts in rows:
        text = str(msg)
        if m := _RESCORING.match(text):
            phase, total, since = "re-scoring", int(m.group(1)), _num(ts)
        elif m := _TEST.match(text):
            phase, total, since = "test", int(m.group(1)), _num(ts)
    done = 0
    if phase in ("re-scoring", "test") and since is not None and not results.empty:
        later = results.loc[results["ts"] >= since]
        if phase == "test":
            later = later.loc[later["split"] == "test"]
        else:
            later = later.loc[later["split"] == "validation"]
        done = min(total, len({int(i) for i in later["candidate_idx"].tolist()}))

    if status != "running":
        return RunProgress("finished", f"finished ({status})", lines)
    if phase == "test":
        text = f"held-out test: {done} of {total} front candidates scored"
    elif phase == "re-scoring":
        text = (
            f"re-scoring: {done} of {total} minibatch candidates scored on the full "
            "validation split"
        )
    else:
        text = f"search: {n_evals} candidate evaluations so far"

    eta: float | None = None
    if phase == "search" and elapsed > 0:
        waits: list[float] = []
        ev, usd, wall = lines
        if ev.left is not None and n_evals > 0:
            waits.append(ev.left * elapsed / n_evals)
        if usd.left is not None and used_usd > 0:
            waits.append(usd.left * elapsed / used_usd)
        if wall.left is not None:
            waits.append(wall.left)
        eta = min(waits) if waits else None
    elif since is not None and done > 0:
        eta = (total - done) * max(0.0, now - since) / done
    eta_text = ""
    if eta is not None:
        eta_text = f"about {format_seconds(eta)}"
        if phase == "search":
            eta_text += " (the search's first limit at its pace so far; the report comes after)"
    return RunProgress(phase, text, lines, eta_text)
