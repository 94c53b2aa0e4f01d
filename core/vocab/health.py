"""Worker health: what an executor knows of its workers, and a run's latest snapshot of it.

Shared vocabulary below the evaluator (`core.evaluation.executor`, whose executors report
`WorkerHealth`), the store (`core.storage.health`, which keeps one `HealthSnapshot` per run)
and the studio (the Runs page shows it), so none imports another's internals.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["HealthSnapshot", "WorkerHealth"]


class WorkerHealth(BaseModel):
    """One worker as last seen by its executor (the studio's Runs page shows these)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str
    """The worker's name in its executor, e.g. `"worker-0"`."""
    state: str
    """`"alive"`, `"unreachable"` (no answer to a ping in time) or `"dead"`."""
    pid: int | None = None
    """The worker's process id (its latest, after a restart)."""
    node: str | None = None
    """The node's address."""
    batches: int = 0
    """Batches this worker finished for the driver."""
    runs: int = 0
    """Runs (example x trial) this worker finished for the driver."""
    restarts: int = 0
    """Times the driver saw it come back as a new process (its pid changed)."""
    in_flight: int = 0
    """Runs the driver has sent it and not had back yet."""
    last_seen: float | None = None
    """Unix seconds of its latest answer (a ping or a batch); None: never answered."""


class HealthSnapshot(BaseModel):
    """A run's workers at one moment, as the driver of the run recorded them."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    run_id: str = Field(min_length=1)
    """The run whose driver took it."""
    executor: str
    """The executor's `describe()`, e.g. `"ray: 2 workers, local 127.0.0.1"`."""
    taken_at: float
    """Unix seconds when it was taken."""
    workers: tuple[WorkerHealth, ...] = ()
    """Each worker, in the executor's order."""

    def age_s(self, now: float) -> float:
        """Seconds since it was taken (0 for a clock that went back)."""
        return max(0.0, now - self.taken_at)
