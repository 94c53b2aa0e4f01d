"""Undo and redo for the editor's working copy: a pure value, no Streamlit.

An `EditHistory` is the working copy's text with the texts before it (undo) and after it (redo).
`push` records an edit (and forgets what could be redone, as every editor does), `undo` and
`redo` step through it. Texts are the JSON tab's text (`spec_to_text`), so an undo restores
ids and all.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

__all__ = ["MAX_UNDO", "EditHistory"]

MAX_UNDO = 50
"""Steps of undo kept (the oldest are dropped): 50 specs of a few KiB each."""


@dataclass(frozen=True, slots=True)
class EditHistory:
    """The working copy and the steps around it.

    Attributes:
        current: the working copy's text.
        undo: earlier texts, oldest first (the last one is what Undo restores).
        redo: undone texts, the next one to redo last.
    """

    current: str
    undo: tuple[str, ...] = field(default=())
    redo: tuple[str, ...] = field(default=())

    def push(self, text: str) -> EditHistory:
        """`text` becomes the working copy; the old one can be undone. An unchanged text is no
        step (a form applied without a change does not fill the undo list)."""
        if text == self.current:
            return self
        return EditHistory(text, (*self.undo, self.current)[-MAX_UNDO:], ())

    def back(self) -> EditHistory:
        """One step back (unchanged when there is nothing to undo)."""
        if not self.undo:
            return self
        return replace(
            self, current=self.undo[-1], undo=self.undo[:-1], redo=(*self.redo, self.current)
        )

    def forward(self) -> EditHistory:
        """One step forward again (unchanged when there is nothing to redo)."""
        if not self.redo:
            return self
        return replace(
            self, current=self.redo[-1], undo=(*self.undo, self.current), redo=self.redo[:-1]
        )

    def to_json(self) -> dict[str, object]:
        """The history as JSON-ready data (for a stored draft)."""
        return {"current": self.current, "undo": list(self.undo), "redo": list(self.redo)}

    @classmethod
    def from_json(cls, data: object) -> EditHistory | None:
        """The history stored by `to_json`, or None when `data` is not one."""
        if not isinstance(data, dict):
            return None
        cur, undo, redo = data.get("current"), data.get("undo", []), data.get("redo", [])  # type: ignore[union-attr]
        if not isinstance(cur, str) or not isinstance(undo, list) or not isinstance(redo, list):
            return None
        if not all(isinstance(t, str) for t in [*undo, *redo]):  # type: ignore[misc]
            return None
        return cls(cur, tuple(undo)[-MAX_UNDO:], tuple(redo)[-MAX_UNDO:])  # type: ignore[arg-type]
