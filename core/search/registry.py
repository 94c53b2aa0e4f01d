"""A topology registry on disk: named topologies, each an append-only history of versions.

This is where an application keeps the topologies it runs, and what `apply_result` writes to
when a search's winner is approved. Layout under the registry's root directory:

```
<root>/<name>/v000001.json        version 1's spec (plain topology JSON: `parse_topology` reads it)
<root>/<name>/v000001.meta.json   version 1's record (`VersionRecord`: hash, time, approval, note)
<root>/<name>/current.json        a copy of the current version's spec, for readers of one path
<root>/<name>/.lock               locked (`flock`) while a write checks its base and writes
<root>/<name>/.pending.json       a write in progress (its journal entry; see "Recovery")
<root>/<name>/learned/<digest>.json  the learned condition artefacts its versions route on
                                  (`core.search.learned`; content-addressed, written before the
                                  version that names them, never removed)
```

Versions are numbered 1, 2, 3, ... per name and never rewritten: `rollback(name, v)` writes a new
version with version `v`'s spec, so history keeps every step (and every approval). The version
files are the truth; `current.json` is a convenience copy refreshed after each write.

Writes are atomic and checked (architecture, "Diffs"): `write(name, spec, base_version)` takes the
name's lock, refuses with `StaleTargetError` unless the current version is still `base_version`
(the version the diff was made against; `None` for a name that does not exist yet), then writes
each file to a temporary file in the same directory, `fsync`s it and `os.replace`s it into place
(the record first, then the spec file, whose appearance commits the version), and `fsync`s the
directory. A reader never sees a half-written file, and two writers racing from the same base
cannot both win: the second one sees the first one's version and is refused.

Recovery: a write is one recoverable step. Its journal entry,
`.pending.json` (the version's record, and the caller's record of it, e.g. the run store's
proposal and approval), is written first; then the record file, the spec file (the commit
point) and `current.json`. The entry is removed when the write is complete, or, when the
caller has a record to store elsewhere, once the caller `settle`s it after storing that record.
`recover()` (run by every `write` under the name's lock, and by whoever opens the registry for
an apply) finishes or rolls back what a killed writer left: with the spec file present the
write is completed (record file and `current.json` rewritten) and, if it carries a caller's
record, returned for the caller to store and `settle`; without it, the write is rolled back
(its record file removed). Temporary files of killed writes, record files without a spec and a
stale `current.json` are cleaned up too.

A registry the file system refuses (a read-only folder, a path below a file, `/proc/...`, a full
disk) is an `ApplyError` saying so, never a bare `OSError`: `"cannot write registry <root>: <why>"`
(nothing of the version was written then) or `"cannot read registry <root>: <why>"`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import ApplyError, SpecError, StaleTargetError
from core.hydrate import CallableRegistry
from core.ir import TopologySpec, parse_topology
from core.ir.canonical import spec_hash
from core.ir.limits import MAX_DEPTH_CEILING, SpecLimits
from core.search.learned import load_applied

try:  # POSIX advisory locks; elsewhere the base check still runs, without the lock.
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - not on Linux
    _fcntl = None

__all__ = ["Approval", "PendingWrite", "RecoveryReport", "TopologyRegistry", "VersionRecord"]

_log = logging.getLogger(__name__)

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_VERSION_RE = re.compile(r"^v(\d{6})\.json$")


_READ_LIMITS = SpecLimits(max_depth=MAX_DEPTH_CEILING, max_nodes=100_000)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Approval(BaseModel):
    """Who approved a write, when, and why (recorded with the version it made)."""

    model_config = _CONFIG

    by: str = Field(min_length=1)
    """Who approved it, e.g. a user name or `"cli:alice"`."""
    at: str = Field(default_factory=_now_iso)
    """When, as an ISO-8601 UTC timestamp, e.g. `"2025-01-31T12:00:00+00:00"`."""
    comment: str = ""
    """Free text, e.g. `"run 3f2a candidate 7: +4 pts accuracy at half the cost"`."""


class VersionRecord(BaseModel):
    """One version of a named topology: what was written, against which base, approved by whom."""

    model_config = _CONFIG

    name: str
    """The topology's name in the registry."""
    version: int = Field(ge=1)
    """1-based version number."""
    spec_hash: str
    """Canonical content hash of the spec (`core.ir.spec_hash`)."""
    created_at: str
    """When the version was written, ISO-8601 UTC."""
    base_version: int | None
    """The version it replaced (`None` for the first one)."""
    approval: Approval | None = None
    """The approval it was written under, if any."""
    note: str = ""
    """Where it came from, e.g. `"rollback to v2"` or `"run 3f2a candidate 7"`."""


PENDING_FILE = ".pending.json"
"""A name's write in progress: its journal entry (see the module docstring, "Recovery")."""


def _step(name: str) -> None:
    """A point between two steps of a write (`"pending"`, `"meta"`, `"spec"`, `"current"`,
    `"settle"`): does nothing. Crash tests replace it to kill the process at each step."""


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """A completed registry write whose caller's record was not stored yet.

    Attributes:
        name: the topology's name.
        version: the version that was written.
        record: what the caller gave `write(record=...)` to store elsewhere (JSON-like).
    """

    name: str
    version: int
    record: dict[str, Any]


@dataclass(slots=True)
class RecoveryReport:
    """What `TopologyRegistry.recover` found and did.

    Attributes:
        completed: `(name, version)` of writes it completed (the spec was written).
        rolled_back: `(name, version)` of writes it rolled back (the spec was not written).
        to_record: completed writes whose caller's record is still to be stored (then
            `settle`d).
        removed: debris removed (temporary files, record files without a spec), file names
            relative to the registry root.
    """

    completed: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    rolled_back: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    to_record: list[PendingWrite] = field(default_factory=list[PendingWrite])
    removed: list[str] = field(default_factory=list[str])


def _check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ValueError(
            f"invalid topology name {name!r}: use letters, digits, '_', '.', '-' "
            "(at most 128 characters, not starting with '.' or '-')"
        )
    return name


def _why(exc: OSError) -> str:
    """What the file system said, e.g. `"Not a directory: /data/file/reg"`."""
    why = exc.strerror or str(exc) or type(exc).__name__
    return f"{why}: {exc.filename}" if exc.filename else why


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically: temp file in the same dir, fsync, `os.replace`."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def spec_to_json(spec: TopologySpec) -> str:
    """The JSON text a registry stores for `spec` (indented, every field, ids kept)."""
    return spec.model_dump_json(indent=2) + "\n"


class TopologyRegistry:
    """A directory of named topologies with versioned, atomically written JSON files.

    Args:
        root: the registry directory (created on the first write).
        limits: limits for reading stored specs back; default the IR's ceiling (depth 64,
            100,000 nodes), so whatever a search could produce can be read again.

    A live handle over files: every call reads the disk, so two handles (or two processes) on
    the same directory see each other's writes.
    """

    def __init__(self, root: str | os.PathLike[str], *, limits: SpecLimits | None = None) -> None:
        self.root = Path(root)
        self.limits = limits or _READ_LIMITS

    def __repr__(self) -> str:
        return f"TopologyRegistry({str(self.root)!r})"

    # -- reading ---------------------------------------------------------------------------

    def _read_error(self, exc: OSError) -> ApplyError:
        return ApplyError(f"cannot read registry {self.root}: {_why(exc)}")

    def _write_error(self, exc: OSError) -> ApplyError:
        return ApplyError(f"cannot write registry {self.root}: {_why(exc)}")

    def names(self) -> list[str]:
        """Names with at least one version, sorted.

        Raises:
            ApplyError: the registry folder cannot be listed.
        """
        if not self.root.is_dir():
            return []
        try:
            dirs = [p.name for p in self.root.iterdir() if p.is_dir()]
        except OSError as exc:
            raise self._read_error(exc) from exc
        return sorted(n for n in dirs if self._versions(n))

    def _versions(self, name: str) -> list[int]:
        d = self.root / name
        if not d.is_dir():
            return []
        found: list[int] = []
        try:
            for p in d.iterdir():
                m = _VERSION_RE.match(p.name)
                if m:
                    found.append(int(m.group(1)))
        except OSError as exc:
            raise self._read_error(exc) from exc
        return sorted(found)

    def current_version(self, name: str) -> int | None:
        """The current (highest) version of `name`, or `None` when it has none.

        Raises:
            ApplyError: the name's folder cannot be listed.
        """
        versions = self._versions(_check_name(name))
        return versions[-1] if versions else None

    def folder(self, name: str) -> Path:
        """The folder of `name`'s files (`<root>/<name>`; what `learned/` sits in)."""
        return self.root / _check_name(name)

    def load(self, name: str, callables: CallableRegistry) -> tuple[int, TopologySpec]:
        """`current(name)`, with the learned artefacts its spec names registered in
        `callables` from the folder beside it (`core.search.learned.load_applied`).

        Raises:
            ApplyError: no version, an invalid spec, or a learned artefact missing or damaged.
        """
        version, spec = self.current(name)
        try:
            load_applied(self.folder(name), spec, callables)
        except (ValueError, ValidationError) as exc:
            raise ApplyError(f"{self.folder(name)}: {exc}") from exc
        return version, spec

    def _spec_path(self, name: str, version: int) -> Path:
        return self.root / name / f"v{version:06d}.json"

    def _meta_path(self, name: str, version: int) -> Path:
        return self.root / name / f"v{version:06d}.meta.json"

    def get(self, name: str, version: int) -> TopologySpec:
        """Version `version` of `name`.

        Raises:
            ApplyError: no such version, its file cannot be read, or it is not a valid spec
                (names the file).
        """
        path = self._spec_path(_check_name(name), version)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ApplyError(f"{self.root}: topology {name!r} has no version {version}") from None
        except OSError as exc:
            raise self._read_error(exc) from exc
        try:
            return parse_topology(text, self.limits)
        except SpecError as exc:
            raise ApplyError(f"{path}: not a valid topology spec: {exc}") from exc

    def current(self, name: str) -> tuple[int, TopologySpec]:
        """The current version of `name` and its spec.

        Raises:
            ApplyError: `name` has no version in this registry (or its file is invalid).
        """
        version = self.current_version(name)
        if version is None:
            raise ApplyError(f"{self.root}: no topology named {name!r}")
        return version, self.get(name, version)

    def record(self, name: str, version: int) -> VersionRecord:
        """The record of one version (a minimal one if its record file is missing).

        Raises:
            ApplyError: the record or the spec cannot be read.
        """
        path = self._meta_path(_check_name(name), version)
        try:
            return VersionRecord.model_validate_json(path.read_bytes())
        except (FileNotFoundError, ValidationError):
            pass
        except OSError as exc:
            raise self._read_error(exc) from exc
        spec = self.get(name, version)
        return VersionRecord(
            name=name,
            version=version,
            spec_hash=spec_hash(spec),
            created_at="",
            base_version=None if version == 1 else version - 1,
            note="(record missing)",
        )

    def history(self, name: str) -> list[VersionRecord]:
        """Every version of `name`, oldest first (empty when it has none)."""
        return [self.record(name, v) for v in self._versions(_check_name(name))]

    # -- writing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, name: str) -> Generator[None]:
        """Hold `name`'s lock (its folder and lock file are created first).

        Raises:
            ApplyError: the folder or the lock file cannot be made, or the lock taken.
        """
        d = self.root / name
        try:
            d.mkdir(parents=True, exist_ok=True)
            fh = open(d / ".lock", "a+b")  # closed by the `with` below, after the yield
        except OSError as exc:
            raise self._write_error(exc) from exc
        with fh:
            if _fcntl is not None:
                try:
                    _fcntl.flock(fh.fileno(), _fcntl.LOCK_EX)
                except OSError as exc:  # e.g. ENOLCK on a file system without locks
                    raise self._write_error(exc) from exc
            try:
                yield
            finally:
                if _fcntl is not None:
                    _fcntl.flock(fh.fileno(), _fcntl.LOCK_UN)

    # -- recovery --------------------------------------------------------------------------

    def recover(self, name: str | None = None) -> RecoveryReport:
        """Complete or roll back what killed writes left (see the module docstring).

        Args:
            name: one topology, or None for every name in the registry.

        Returns:
            What was completed, rolled back, is still to be recorded, and removed.

        Raises:
            ApplyError: the registry cannot be read or written.
        """
        report = RecoveryReport()
        if name is not None:
            names = [_check_name(name)]
        elif not self.root.is_dir():
            return report
        else:
            try:
                names = sorted(p.name for p in self.root.iterdir() if p.is_dir())
            except OSError as exc:
                raise self._read_error(exc) from exc
        for n in names:
            if not _NAME_RE.match(n) or not (self.root / n).is_dir():
                continue
            with self._locked(n):
                self._recover_locked(n, report)
        return report

    def _recover_locked(self, name: str, report: RecoveryReport) -> None:
        """`recover` for one name, its lock held (so no live writer is half-way)."""
        d = self.root / name
        try:
            for p in sorted(d.iterdir()):
                if p.name.startswith(".") and p.name.endswith(".tmp"):
                    p.unlink(missing_ok=True)
                    report.removed.append(f"{name}/{p.name}")
            pending_path = d / PENDING_FILE
            pending: dict[str, Any] | None = None
            if pending_path.exists():
                try:
                    pending = json.loads(pending_path.read_text(encoding="utf-8"))
                except ValueError:  # torn before its atomic rename: impossible; be safe
                    pending = None
            keep_pending = False
            if pending is not None:
                version = int(pending["version"])
                rec = VersionRecord.model_validate(pending["meta"])
                if self._spec_path(name, version).exists():
                    meta = self._meta_path(name, version)
                    if not meta.exists():
                        _atomic_write_text(meta, rec.model_dump_json(indent=2))
                    report.completed.append((name, version))
                    if pending.get("record") is not None:
                        report.to_record.append(PendingWrite(name, version, pending["record"]))
                        keep_pending = True
                else:
                    self._meta_path(name, version).unlink(missing_ok=True)
                    report.rolled_back.append((name, version))
            versions = set(self._versions(name))
            for p in sorted(d.glob("v*.meta.json")):
                m = re.fullmatch(r"v(\d{6})\.meta\.json", p.name)
                if m and int(m.group(1)) not in versions:
                    p.unlink(missing_ok=True)
                    report.removed.append(f"{name}/{p.name}")
            if versions:
                text = self._spec_path(name, max(versions)).read_text(encoding="utf-8")
                current = d / "current.json"
                if not current.exists() or current.read_text(encoding="utf-8") != text:
                    _atomic_write_text(current, text)
            if not keep_pending:
                pending_path.unlink(missing_ok=True)
            _fsync_dir(d)
        except OSError as exc:
            raise self._write_error(exc) from exc

    def settle(self, name: str, version: int) -> None:
        """Mark a write's caller's record as stored: its journal entry is removed.

        Raises:
            ApplyError: the entry cannot be removed.
        """
        with self._locked(_check_name(name)):
            path = self.root / name / PENDING_FILE
            try:
                data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
                if data is not None and int(data["version"]) == version:
                    _step("settle")
                    path.unlink()
                    _fsync_dir(path.parent)
            except OSError as exc:
                raise self._write_error(exc) from exc

    def write(
        self,
        name: str,
        spec: TopologySpec,
        base_version: int | None,
        *,
        approval: Approval | None = None,
        note: str = "",
        record: Mapping[str, Any] | None = None,
    ) -> VersionRecord:
        """Write `spec` as the next version of `name`, if `name` is still at `base_version`.

        Args:
            name: the topology's name (letters, digits, `_`, `.`, `-`).
            spec: the full, validated spec to store.
            base_version: the version the caller's diff was made against; `None` when `name`
                did not exist.
            approval: who approved the write (recorded with the version).
            note: where the spec came from (recorded), e.g. `"run 3f2a candidate 7"`.
            record: a JSON-like record the caller stores elsewhere once the write is done
                (e.g. the run store's proposal and approval). It is journaled with the write;
                call `settle(name, version)` once it is stored. A killed caller's record is
                returned by the next `recover()` (see the module docstring).

        Returns:
            The new version's record.

        Raises:
            StaleTargetError: the current version is not `base_version`; nothing was written.
            ApplyError: the file system refused the write (`"cannot write registry <root>:
                <why>"`); nothing was written (a version exists only once its spec file does).
            ValueError: an invalid name.
        """
        _check_name(name)
        with self._locked(name):
            leftover = RecoveryReport()
            self._recover_locked(name, leftover)  # what a killed writer left, first
            if leftover.to_record:
                _log.warning(
                    "%s: version %d of %r has a record still to store (an apply was killed); "
                    "run an apply of it to record it",
                    self.root,
                    leftover.to_record[0].version,
                    name,
                )
            current = self.current_version(name)
            if current != base_version:
                raise StaleTargetError(
                    f"{self.root}: topology {name!r} is at version {current}, not "
                    f"{base_version} that the diff was made against; nothing was written "
                    "(make the diff again)"
                )
            version = 1 if current is None else current + 1
            rec = VersionRecord(
                name=name,
                version=version,
                spec_hash=spec_hash(spec),
                created_at=_now_iso(),
                base_version=current,
                approval=approval,
                note=note,
            )
            text = spec_to_json(spec)
            meta = self._meta_path(name, version)
            pending = self.root / name / PENDING_FILE
            entry = {
                "version": version,
                "meta": rec.model_dump(mode="json"),
                "record": None if record is None else dict(record),
            }
            try:
                _atomic_write_text(pending, json.dumps(entry, indent=2))
                _step("pending")
                _atomic_write_text(meta, rec.model_dump_json(indent=2))
                _step("meta")
                _atomic_write_text(self._spec_path(name, version), text)
                _step("spec")
            except OSError as exc:
                with contextlib.suppress(OSError):  # no record of a version that is not there
                    meta.unlink(missing_ok=True)
                    pending.unlink(missing_ok=True)
                raise self._write_error(exc) from exc
            try:  # the version is written: a stale convenience copy is no reason to say not
                _atomic_write_text(self.root / name / "current.json", text)
                _step("current")
            except OSError as exc:
                _log.warning(
                    "%s: version %d of %r written, but its current.json was not refreshed: %s",
                    self.root,
                    version,
                    name,
                    _why(exc),
                )
            if record is None:
                with contextlib.suppress(OSError):  # recover() removes it if this fails
                    pending.unlink()
            _fsync_dir(self.root / name)
        return rec

    def rollback(
        self,
        name: str,
        version: int,
        *,
        base_version: int | None = None,
        approval: Approval | None = None,
    ) -> VersionRecord:
        """Make version `version`'s spec current again, as a new version (history is kept).

        Args:
            name: the topology's name.
            version: the version to restore.
            base_version: the version the caller expects to be current; default: whatever is
                current now.
            approval: who approved the rollback.

        Raises:
            ApplyError: no such version.
            StaleTargetError: `base_version` was given and is no longer current.
        """
        spec = self.get(name, version)
        base = self.current_version(name) if base_version is None else base_version
        return self.write(name, spec, base, approval=approval, note=f"rollback to v{version}")
