"""Budgets and stopping: when a search ends before its strategy runs out of generations.

A `Budget` is a frozen record of limits; a `BudgetTracker` is the live handle a run keeps (what
has been used, whether a limit is reached); a `StopSignal` collects the ways a person stops a run
cleanly (a stop file, Ctrl-C, a call from another thread, e.g. the studio). All are checked by
the search engine *between* candidate evaluations, so a stopped run has only complete records,
with one exception: wall time. An evaluation still running when `max_wall_s` is reached is cut
short there (a hanging agent must not hold a run past its limit); the examples it finished are
recorded, the candidate is not, and the run stops as by any budget (resumable: a resumed run
replays what was recorded, then stops at the same point).

What counts (the same figures `RunFinished.budget_used` reports):

- `evaluations`: candidate evaluations. The seed's evaluation on the validation split counts
  one; each proposal evaluated on a minibatch counts one (its promotion to the full validation
  split is part of the same evaluation). Rejected and duplicate proposals count nothing: nothing
  ran. This is the unit of `ProblemConfig.search.max_evaluations` ("the seed counts").
- `usd`: priced model usage of everything the run needed, evaluations plus design (the meta
  agent's calls). It is the *logical* cost: an example result that this run needs for the first
  time counts its recorded cost even when a cache (or a resumed journal) served it, so the same
  seed and inputs stop at the same point whatever the cache held. `usd_spent` is what this
  process actually paid.
- `wall_s`: seconds since the run started (a resumed run adds the recorded run's span).
- patience: candidate evaluations in a row without a new best aggregate score on the full
  validation split (a promoted candidate that beats the best so far resets it).
"""

from __future__ import annotations

import asyncio
import math
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.errors import BudgetError

__all__ = ["Budget", "BudgetTracker", "StopSignal"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class Budget(BaseModel):
    """Limits on one search run; None means no limit.

    A limit of zero allows no work: `validate_allows_work()` (called by the engine before
    anything runs) raises `BudgetError` for it. The model itself accepts zero so the error is
    the engine's clear one, not a validation error.
    """

    model_config = _CONFIG

    max_evaluations: int | None = Field(default=None, ge=0)
    """Stop before a candidate evaluation that would make more than this many (the seed counts
    one). Never exceeded."""
    max_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Stop once the logical cost (evaluations plus design, USD) reaches this. Checked before
    every design and every evaluation, so a run overshoots by at most the one step in flight."""
    max_wall_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Stop once the run has taken this many seconds: checked between evaluations, and an
    evaluation still running at the limit is cut short there (see the module docstring)."""
    patience: int | None = Field(default=None, ge=0)
    """Stop after this many candidate evaluations in a row without a new best score on the full
    validation split."""

    def validate_allows_work(self) -> None:
        """Raise `BudgetError` when a limit allows no work at all.

        Raises:
            BudgetError: `max_evaluations`, `max_usd`, `max_wall_s` or `patience` is 0.
        """
        for name in ("max_evaluations", "max_usd", "max_wall_s", "patience"):
            value = getattr(self, name)
            if value is not None and value == 0:
                raise BudgetError(
                    f"budget {name}=0 allows no work: give a positive value or None (no limit)"
                )

    @property
    def bounded(self) -> bool:
        """True when at least one limit is set."""
        return any(
            v is not None
            for v in (self.max_evaluations, self.max_usd, self.max_wall_s, self.patience)
        )


class BudgetTracker:
    """What a run has used so far, against its `Budget` (a live handle, not a record).

    Costs are summed with `math.fsum` over per-item values, so the totals do not depend on the
    order results arrive in (concurrent examples), and a resumed run sees the same figures as
    an uninterrupted one. A NaN cost (an unpriced model: that evaluation is invalid anyway)
    counts as 0.

    Args:
        budget: the limits.
        clock: seconds, monotonic (tests pass a fake); `time.monotonic` by default.
        wall_offset_s: seconds already used before this process started (a resumed run).
    """

    def __init__(
        self,
        budget: Budget,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_offset_s: float = 0.0,
    ) -> None:
        self.budget = budget
        self._clock = clock
        self._start = clock()
        self._wall_offset_s = max(0.0, wall_offset_s)
        self.evaluations = 0
        """Candidate evaluations so far."""
        self.since_improvement = 0
        """Candidate evaluations since the last new best."""
        self._examples: dict[tuple[str, str, int], float] = {}
        self._design: list[float] = []
        self._design_requests = 0
        self._design_tokens = (0, 0)
        self._spent: list[float] = []

    @staticmethod
    def _usd(value: float) -> float:
        return value if math.isfinite(value) and value > 0 else 0.0

    def record_example(self, key: tuple[str, str, int], cost_usd: float, *, fresh: bool) -> bool:
        """Count one example run `(spec_hash, example_id, trial)` the first time it is needed.

        Args:
            key: the evaluation cache key.
            cost_usd: its recorded cost.
            fresh: True when it was run now (paid), False when a cache or journal served it.

        Returns:
            True when the key was new to this run (it counted), False when already counted.
        """
        if key in self._examples:
            return False
        self._examples[key] = self._usd(cost_usd)
        if fresh:
            self._spent.append(self._usd(cost_usd))
        return True

    def record_design(
        self, cost_usd: float, *, fresh: bool, requests: int = 0, tokens: tuple[int, int] = (0, 0)
    ) -> None:
        """Count one proposal's design cost, its designer requests and (input, output) tokens
        (`fresh=False`: replayed from a journal)."""
        self._design.append(self._usd(cost_usd))
        self._design_requests += requests
        self._design_tokens = (
            self._design_tokens[0] + tokens[0],
            self._design_tokens[1] + tokens[1],
        )
        if fresh:
            self._spent.append(self._usd(cost_usd))

    @property
    def example_evaluations(self) -> int:
        """Example runs (example x trial) this run needed, each counted once."""
        return len(self._examples)

    @property
    def eval_usd(self) -> float:
        """Logical USD of those example runs."""
        return math.fsum(self._examples.values())

    @property
    def design_usd(self) -> float:
        """USD of design (meta agent) calls, replayed ones included."""
        return math.fsum(self._design)

    @property
    def usd(self) -> float:
        """Logical cost so far: evaluations plus design, USD."""
        return math.fsum([*self._examples.values(), *self._design])

    @property
    def usd_spent(self) -> float:
        """USD this process actually paid (cache hits and replayed work excluded)."""
        return math.fsum(self._spent)

    @property
    def wall_s(self) -> float:
        """Seconds used so far (including a resumed run's recorded span)."""
        return self._wall_offset_s + (self._clock() - self._start)

    def wall_left_s(self) -> float | None:
        """Seconds left before `max_wall_s` (0 or less: reached), None without a wall limit."""
        if self.budget.max_wall_s is None:
            return None
        return self.budget.max_wall_s - self.wall_s

    def exhausted(self, *, next_evaluation: bool = False, wall: bool = True) -> str | None:
        """The reason the run must stop now, or None.

        Args:
            next_evaluation: True when asking before a candidate evaluation: then
                `max_evaluations` is reached when one more would exceed it.
            wall: False leaves `max_wall_s` out (a resumed run replaying recorded work, whose
                recorded span may already be past the limit, must reach its recorded end).

        Returns:
            e.g. `"max_evaluations reached (40)"`, `"max_usd reached (1.02 >= 1)"`,
            `"max_wall_s reached (60 s)"`,
            `"patience exhausted (10 evaluations without a new best)"`.
        """
        b = self.budget
        if b.max_evaluations is not None:
            used = self.evaluations + (1 if next_evaluation else 0)
            if used > b.max_evaluations or self.evaluations >= b.max_evaluations:
                return f"max_evaluations reached ({b.max_evaluations})"
        usd = self.usd
        if b.max_usd is not None and usd >= b.max_usd:
            return f"max_usd reached ({usd:.6g} >= {b.max_usd:g})"
        if wall and b.max_wall_s is not None and self.wall_s >= b.max_wall_s:
            return f"max_wall_s reached ({b.max_wall_s:g} s)"
        if b.patience is not None and self.since_improvement >= b.patience:
            return f"patience exhausted ({self.since_improvement} evaluations without a new best)"
        return None

    def used(self) -> dict[str, float]:
        """The figures for `RunFinished.budget_used` (wall time excluded from equality checks:
        it is the only one that is not deterministic)."""
        return {
            "evaluations": float(self.evaluations),
            "example_evaluations": float(self.example_evaluations),
            "usd": self.usd,
            "eval_usd": self.eval_usd,
            "design_usd": self.design_usd,
            # the designer's own requests and tokens (replayed ones included), not the candidates'
            "design_requests": float(self._design_requests),
            "design_input_tokens": float(self._design_tokens[0]),
            "design_output_tokens": float(self._design_tokens[1]),
            "usd_spent": self.usd_spent,
            "wall_s": self.wall_s,
        }


class StopSignal:
    """The ways a person stops a run cleanly: a stop file, SIGINT, or `request()`.

    `reason()` is checked by the engine between evaluations; the run then finishes with
    `RunFinished(status="stopped")` and still reports its result.

    - stop file: the run stops when the file exists (it is not deleted; remove it before
      resuming).
    - SIGINT: inside `sigint_handler()`, the first Ctrl-C requests a stop; a second one stops
      the run at once, but lets it unwind (see `sigint_handler`). The handler is installed only
      when called from the main thread (Python allows signal handlers nowhere else) and the
      previous one is restored on exit.
    - `request(reason)`: thread-safe, e.g. from the studio's stop button.

    Args:
        stop_file: a path whose existence stops the run, or None.
    """

    def __init__(self, stop_file: str | Path | None = None) -> None:
        self.stop_file = None if stop_file is None else Path(stop_file)
        self._event = threading.Event()
        self._reason = ""
        self._lock = threading.Lock()

    def request(self, reason: str = "stop requested") -> None:
        """Ask the run to stop at its next check (thread-safe; the first reason wins)."""
        with self._lock:
            if not self._event.is_set():
                self._reason = reason
                self._event.set()

    def reason(self) -> str | None:
        """Why the run must stop (`"stop file <path>"`, `"SIGINT"`, ...), or None."""
        if self._event.is_set():
            return self._reason
        if self.stop_file is not None and self.stop_file.exists():
            self.request(f"stop file {self.stop_file}")
            return self._reason
        return None

    def sigint_handler(self) -> _SigintGuard:
        """A context manager installing the clean-stop SIGINT handler (main thread only).

        The first Ctrl-C requests a stop (`reason()` is then `"SIGINT"`). A second one stops the
        run now, without raising `KeyboardInterrupt` at whatever line the interpreter is on
        (inside the event loop that leaves tasks half run, their exceptions never retrieved and
        coroutines never awaited): it goes to the handler that was installed before, which under
        `asyncio.run` cancels the main task and, once it has unwound (the engine records the run
        as stopped), raises `KeyboardInterrupt` from `asyncio.run`. When the previous handler is
        Python's default and the guard was entered in a task (an event loop run another way),
        that task is cancelled instead (its caller sees `CancelledError`); outside any event
        loop, `KeyboardInterrupt` is raised as usual. A third Ctrl-C goes to the previous
        handler again (under `asyncio.run`: an immediate `KeyboardInterrupt`).
        """
        return _SigintGuard(self)


def _noop() -> None:
    """Wakes an event loop waiting in `select` (a handle to run)."""


class _SigintGuard:
    def __init__(self, stop: StopSignal) -> None:
        self._stop = stop
        self._previous: Any = None
        self._installed = False
        self._task: asyncio.Task[Any] | None = None
        self._interrupted = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._stop.reason() is None:
            self._stop.request("SIGINT")
            return
        previous = self._previous
        if callable(previous) and previous is not signal.default_int_handler:
            previous(signum, frame)  # asyncio.run's: cancels its main task, then interrupts
            return
        task = self._task
        if not self._interrupted and task is not None and not task.done():
            self._interrupted = True
            task.cancel("SIGINT")
            task.get_loop().call_soon_threadsafe(_noop)
            return
        # outside an event loop (or a third Ctrl-C): give the user their interrupt back
        signal.signal(signal.SIGINT, signal.default_int_handler)
        raise KeyboardInterrupt

    def __enter__(self) -> _SigintGuard:
        if threading.current_thread() is threading.main_thread():
            try:
                self._task = asyncio.current_task()
            except RuntimeError:  # no running event loop
                self._task = None
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
            self._task = None
