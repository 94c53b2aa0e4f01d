"""Editor drafts that survive a browser reload: one small JSON file per draft beside the store.

A draft is the editor's working copy with its undo/redo history, its name and where it came
from. Its id sits in the editor's URL (`?draft=<id>`), so a reload (a new Streamlit session)
finds it again, and two browser tabs keep two drafts. The files live in `<db>.drafts/`, not in a
DuckDB table: the studio must keep drafts while another process holds the database file (the
store is then the read-only journal view), and a draft is the studio's own state, not a record of
a run. Each write is atomic (a temporary file renamed over the old one).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from studio.views.history import EditHistory

__all__ = ["Draft", "DraftStore", "new_draft_id"]

_ID = re.compile(r"^[A-Za-z0-9_-]{8,40}$")
MAX_DRAFT_BYTES = 8 * 1024 * 1024
"""A draft file larger than this is not read (the spec limits bound a topology far below it)."""


def new_draft_id() -> str:
    """A fresh random draft id (URL-safe, 11 characters)."""
    return secrets.token_urlsafe(8)


@dataclass(frozen=True, slots=True)
class Draft:
    """One stored draft.

    Attributes:
        draft_id: its id (the `draft` query parameter).
        history: the working copy and its undo/redo steps.
        name: the topology name typed in the editor.
        source: what was loaded ("seed of gsm8k_replay", "gsm8k_replay v2", ...).
        problem: the problem the editor checks names against.
        parent: `(run_id, candidate_idx)` of the candidate it was loaded from, if any (the
            editor's evaluations are compared with it).
        origin_hash: the spec hash of the topology as loaded ("" if unknown): the parent is
            looked up by it when `parent` is None.
        updated_at: Unix time of the last write.
    """

    draft_id: str
    history: EditHistory
    name: str = ""
    source: str = ""
    problem: str = ""
    parent: tuple[str, int] | None = None
    origin_hash: str = ""
    updated_at: float = 0.0


def _parent(value: object) -> tuple[str, int] | None:
    """A stored `[run_id, candidate_idx]`, or None when absent or malformed."""
    if isinstance(value, list) and len(value) == 2:  # pyright: ignore[reportUnknownArgumentType]
        run, idx = value  # pyright: ignore[reportUnknownVariableType]
        if isinstance(run, str) and isinstance(idx, int) and not isinstance(idx, bool):
            return run, idx
    return None


class DraftStore:
    """Drafts as files in one folder (`<db>.drafts/` for the studio's database).

    Args:
        root: the folder (made on the first write).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @classmethod
    def beside(cls, db_path: str | os.PathLike[str]) -> DraftStore:
        """The drafts folder of a database file: `<db>.drafts/`."""
        return cls(f"{os.fspath(db_path)}.drafts")

    def _path(self, draft_id: str) -> Path | None:
        return self.root / f"{draft_id}.json" if _ID.fullmatch(draft_id) else None

    def get(self, draft_id: str) -> Draft | None:
        """The draft, or None when the id is malformed, unknown or its file unreadable."""
        path = self._path(draft_id)
        if path is None:
            return None
        try:
            if not path.is_file() or path.stat().st_size > MAX_DRAFT_BYTES:
                return None
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        history = EditHistory.from_json(data.get("history") if isinstance(data, dict) else None)
        if history is None:
            return None
        return Draft(
            draft_id,
            history,
            name=str(data.get("name") or ""),
            source=str(data.get("source") or ""),
            problem=str(data.get("problem") or ""),
            parent=_parent(data.get("parent")),
            origin_hash=str(data.get("origin_hash") or ""),
            updated_at=float(data.get("updated_at") or 0.0),
        )

    def put(self, draft: Draft) -> bool:
        """Write the draft atomically; False (nothing raised) when the folder is not writable
        or the id is malformed: a lost draft must not break the editor."""
        path = self._path(draft.draft_id)
        if path is None:
            return False
        body = {
            "history": draft.history.to_json(),
            "name": draft.name,
            "source": draft.source,
            "problem": draft.problem,
            "parent": list(draft.parent) if draft.parent is not None else None,
            "origin_hash": draft.origin_hash,
            "updated_at": time.time(),
        }
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".draft-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(body, f)
            os.replace(tmp, path)
        except OSError:
            return False
        return True
