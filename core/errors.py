"""One error tree for the whole engine.

Every error the engine raises on purpose derives from `TopologyStudioError`, so a caller (the
CLI, the studio) can catch one class and show a clear message instead of a traceback. Errors that
are also standard Python categories inherit from those too (`SpecError` is a `ValueError`,
`UnknownNamesError` a `KeyError`), so `except ValueError` and `except KeyError` keep working.

```
TopologyStudioError
├── SpecError (ValueError)            invalid IR: shape, ranges, exactly-one rules
│   └── SpecLimitError                depth / node-count limit exceeded (names limit and JSON path)
├── HydrationError                    a spec cannot be turned into runtime objects
│   └── UnknownNamesError (KeyError)  every unknown registered name with its JSON path
├── StepExecutionError                a runtime primitive failed
│   ├── PipelineStepError             carries step name and index, chained to the cause
│   └── RouterError                   no route matched and there is no fallback
├── EvaluationError                   the evaluator itself is misconfigured (never per example)
├── SearchError                       a search cannot start or continue
│   ├── BudgetError (ValueError)      a budget that allows no work (e.g. zero evaluations)
│   ├── DegenerateSeedError           the seed topology's evaluation is degenerate
│   └── OptimizationError             prompt evolution: a bad genome, candidate or config
├── StoreError                        the run store
│   ├── StoreBusyError                the database file is held by another process
│   ├── StoreReadOnlyError            the file system refuses writes to the database (read-only)
│   ├── StoreCorruptError             the database file is damaged (`store rebuild` restores it)
│   ├── JournalWriteError             a run journal cannot be written (a full disk); resumable
│   └── SchemaVersionError            a database from an unknown (newer) schema version
├── ApplyError                        applying a result to a target
│   └── StaleTargetError              the target changed since the diff was made
├── ProblemError                      a problem definition cannot be loaded (names file and field)
├── DatasetError                      a dataset is missing or fails its checksum
├── ProviderError                     a model provider kept failing (retries used up) or refused
│                                     the request; a search stops resumable, never `failed`
└── AutonomyError                     the runtime layer (orchestrator, sandboxes)
    ├── HookAbortError                a hook aborted a solve (names reason and subtask)
    ├── HookError                     a hook raised (names hook and subtask; partial results)
    └── SandboxError                  no sandbox can start here (no unsandboxed fallback)
```
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = [
    "ApplyError",
    "AutonomyError",
    "BudgetError",
    "DatasetError",
    "DegenerateSeedError",
    "EvaluationError",
    "HookAbortError",
    "HookError",
    "HydrationError",
    "JournalWriteError",
    "OptimizationError",
    "PipelineStepError",
    "ProblemError",
    "ProviderError",
    "RouterError",
    "SandboxError",
    "SchemaVersionError",
    "SearchError",
    "SpecError",
    "SpecLimitError",
    "StaleTargetError",
    "StepExecutionError",
    "StoreBusyError",
    "StoreCorruptError",
    "StoreError",
    "StoreReadOnlyError",
    "TopologyStudioError",
    "UnknownNamesError",
]


class TopologyStudioError(Exception):
    """Base of every error the engine raises on purpose."""


class SpecError(TopologyStudioError, ValueError):
    """A topology spec is invalid.

    Attributes:
        errors: one `(json_path, message)` pair per problem, e.g. `("$.steps[0].operation",
            "unknown kind 'agnet_step'")`. Empty when the error has a single message.
    """

    def __init__(self, message: str, errors: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.errors: list[tuple[str, str]] = list(errors or [])


class SpecLimitError(SpecError):
    """A spec exceeds a structural limit (nesting depth, node count, or its text's size).

    Attributes:
        limit: the limit's name, `"max_depth"`, `"max_nodes"` or `"max_text_bytes"`.
        value: the limit's configured value.
        path: the JSON path where the limit was crossed, e.g. `"$.steps[0].operation.step"`.
    """

    def __init__(self, message: str, *, limit: str, value: int, path: str) -> None:
        super().__init__(message, [(path, message)])
        self.limit = limit
        self.value = value
        self.path = path


class HydrationError(TopologyStudioError):
    """A valid spec cannot be turned into runtime objects."""


class UnknownNamesError(HydrationError, KeyError):
    """A spec names things no registry knows.

    It is a `KeyError` (hence a `LookupError`) as well as a `HydrationError`: code written for
    hydrators that raise `KeyError` on an unknown name (`except KeyError:`) catches it, and
    still gets the full report of every unknown name. Unlike a plain `KeyError`, `str(err)` is
    the report itself, not its `repr`.

    Attributes:
        unknown: one `(json_path, kind, name)` triple per unknown name, in document order, e.g.
            `("$.routes[1].step.agent_name", "agent", "solver_x")`.
        known: the registered names per kind, e.g. `{"agent": ["a", "b"], "callable": [...]}`,
            so a debug retry can show the designer what it may use.
        message: the report: the count, one line per unknown name, then the known names.
    """

    def __init__(
        self,
        unknown: list[tuple[str, str, str]],
        known: dict[str, list[str]] | None = None,
    ) -> None:
        self.unknown = list(unknown)
        self.known = {k: sorted(v) for k, v in (known or {}).items()}
        lines = [f"  {path}: unknown {kind} {name!r}" for path, kind, name in self.unknown]
        msg = f"{len(self.unknown)} unknown name(s) in spec:\n" + "\n".join(lines)
        if self.known:
            msg += "\nknown names: " + "; ".join(
                f"{kind}: {', '.join(names) or '(none)'}" for kind, names in self.known.items()
            )
        super().__init__(msg)
        self.message = msg

    def __str__(self) -> str:
        # KeyError.__str__ would show repr(message): quotes and escaped newlines
        return self.message


class StepExecutionError(TopologyStudioError):
    """A runtime primitive failed while running."""


class PipelineStepError(StepExecutionError):
    """A pipeline step failed (STOP, or RETRY exhausted).

    Attributes:
        step_name: the failing step's name.
        step_index: its 0-based position in the pipeline.
    """

    def __init__(self, message: str, *, step_name: str, step_index: int) -> None:
        super().__init__(message)
        self.step_name = step_name
        self.step_index = step_index


class RouterError(StepExecutionError):
    """A router found no matching route and has no fallback."""


class EvaluationError(TopologyStudioError):
    """The evaluator is misconfigured (per-example failures never raise this)."""


class SearchError(TopologyStudioError):
    """A search cannot start or continue."""


class BudgetError(SearchError, ValueError):
    """A budget that allows no work, e.g. `max_evaluations=0`."""


class DegenerateSeedError(SearchError):
    """The seed topology's evaluation is degenerate (mostly blank or failing outputs).

    Attributes:
        diagnosis: a human-readable explanation (blank rate, error rate, first errors).
    """

    def __init__(self, message: str, *, diagnosis: str = "") -> None:
        super().__init__(message)
        self.diagnosis = diagnosis


class OptimizationError(SearchError):
    """Prompt evolution (`core.optimization`) cannot start or continue: a candidate naming
    genes the genome lacks, a gene that does not exist, or a configuration refused."""


class StoreError(TopologyStudioError):
    """The run store failed."""


class StoreBusyError(StoreError):
    """The database file is held by another process."""


class StoreReadOnlyError(StoreError):
    """The database file, or the folder it would be created in, cannot be written: a read-only
    file system or no permission. Read-only commands open a read-only view instead
    (`core.storage.open_store(..., on_busy="journals")`)."""


class StoreCorruptError(StoreError):
    """The database file is damaged (DuckDB found a bad checksum or no valid header).

    The message names the file and the recovery: the run journals beside it are intact, and
    `topology-studio store rebuild --db <file>` keeps the damaged file aside and restores the
    runs from them (proposals, approvals and saved topology versions lived only in the file).

    Attributes:
        path: the damaged database file.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class JournalWriteError(StoreError):
    """A run journal could not be written (e.g. `ENOSPC`, a full disk).

    Everything journaled before the failed line is kept (a partly written line is cut off),
    and the journal refuses every later append, so a resumed run continues from the last
    complete line.

    Attributes:
        path: the journal file.
        errno: the operating system's error number (`errno.ENOSPC` for a full disk), if any.
    """

    def __init__(self, message: str, *, path: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno


class SchemaVersionError(StoreError):
    """The database was written by an unknown (newer) schema version."""


class ApplyError(TopologyStudioError):
    """Applying a result to a target failed."""


class StaleTargetError(ApplyError):
    """The target changed since the diff was made; nothing was written."""


class ProviderError(TopologyStudioError):
    """A model call failed for good: a transient fault (HTTP 5xx or 429, a timeout, a refused
    or cut connection, a reply that is not JSON) that outlasted the bounded wait, or a refusal
    that waiting cannot fix (any other 4xx). The message names the provider, the model, the
    status and what to do (`core.agents.providers`).

    A search that meets one stops as `stopped` and resumable (what was scored is kept, the
    call cache answers the calls already made); it never ends `failed` for it.

    Attributes:
        model: the `provider:model` name.
        status: the HTTP status, if the provider answered with one.
        transient: True when waiting longer could have helped (5xx, 429, timeout, connection).
    """

    def __init__(
        self, message: str, *, model: str, status: int | None = None, transient: bool = False
    ) -> None:
        super().__init__(message)
        self.model = model
        self.status = status
        self.transient = transient


class ProblemError(TopologyStudioError):
    """A problem definition cannot be loaded.

    Attributes:
        file: the file at fault, when known.
        field: the field at fault (dotted), when known.
    """

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        where = ""
        if file:
            where = f"{file}"
            if field:
                where += f": field {field!r}"
            where += ": "
        super().__init__(where + message)
        self.file = file
        self.field = field


class DatasetError(TopologyStudioError):
    """A dataset is missing, cannot be downloaded, or fails its checksum."""


class AutonomyError(TopologyStudioError):
    """The runtime layer (agents spawned per request) cannot do what was asked."""


class HookAbortError(AutonomyError):
    """A hook returned `Abort` at a subtask boundary: the whole solve stops.

    Attributes:
        reason: the hook's reason.
        subtask: the name of the subtask whose boundary the hook aborted at.
    """

    def __init__(self, reason: str, *, subtask: str) -> None:
        super().__init__(f"aborted by a hook at subtask {subtask!r}: {reason}")
        self.reason = reason
        self.subtask = subtask


class HookError(AutonomyError):
    """A hook raised at a subtask boundary: the solve stops, the hook's exception as the cause.

    Attributes:
        hook: the hook's name (its `__name__`, else its class name).
        subtask: the name of the subtask whose boundary it raised at.
        partial_results: the top-level subtask results finished before it (filled in by
            `MetaOrchestrator.solve`; `SubTaskResult`s).
    """

    def __init__(self, hook: str, *, subtask: str, error: BaseException) -> None:
        super().__init__(
            f"hook {hook!r} raised at subtask {subtask!r}: {type(error).__name__}: {error}"
        )
        self.hook = hook
        self.subtask = subtask
        self.partial_results: list[Any] = []


class SandboxError(AutonomyError):
    """No sandbox can start here, so a generated tool is refused (there is no unsandboxed
    fallback); the message says what is missing and how to install it."""


# ---- a Ctrl-C that reached DuckDB ------------------------------------------------------------
# (a helper, not an error class: outside `__all__`, which lists the error vocabulary)
# DuckDB checks for a pending SIGINT while it runs a query and stops the query; the Python client
# then raises `duckdb.InterruptException`, or, while it converts or scans a result, a bare
# `RuntimeError('Query interrupted')` (duckdb 1.x and 2.0). Either is the user's interrupt, not a
# failure of the store: callers turn it back into an interrupt (exit 130 with the resume hint).


def is_query_interrupt(exc: BaseException) -> bool:
    """True if `exc` is DuckDB's report of a Ctrl-C during a query: an `InterruptException`,
    another DuckDB error whose message names DuckDB's `INTERRUPT Error` (a transaction the
    interrupt ended), or a `RuntimeError` whose message says the query was interrupted. Never
    imports DuckDB (the command line's `--help` does not load it): if it is not loaded, no
    query ran."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is None:
        return False
    if isinstance(exc, duckdb.InterruptException):
        return True
    if isinstance(exc, duckdb.Error):  # e.g. a COMMIT the interrupt failed: DuckDB names it
        return "INTERRUPT Error" in str(exc)
    return type(exc) is RuntimeError and "query interrupted" in str(exc).lower()


def raise_if_interrupt(exc: BaseException) -> None:
    """Raise `KeyboardInterrupt` (from `exc`) if `exc` is DuckDB's report of a Ctrl-C.

    For every `except duckdb.Error` that would otherwise turn the user's interrupt into a
    failure: `InterruptException` is a `duckdb.Error`, so such a handler caught it first and
    disabled a cache, retried a load or raised a `StoreError` for a Ctrl-C.

    Raises:
        KeyboardInterrupt: `is_query_interrupt(exc)`.
    """
    if is_query_interrupt(exc):
        raise KeyboardInterrupt from exc
