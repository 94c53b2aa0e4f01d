"""Output for the command line: rich tables on a terminal, plain parseable text otherwise.

On a terminal, tables are drawn with `rich`; when stdout is not a terminal (a pipe, a file, a
test's subprocess) everything is plain text without colour or box drawing, and tables are
columns separated by two spaces with a header line, one row a line, so a script (or a test) can
split them. Numbers are printed the same way in both modes (`fmt_*`).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.table import Table

__all__ = [
    "Output",
    "fmt_calls",
    "fmt_float",
    "fmt_ms",
    "fmt_pct",
    "fmt_usd",
    "one_line",
]


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f


def fmt_float(value: Any, digits: int = 4) -> str:
    """A number with `digits` decimals; `-` for None, `nan`/`inf` spelled out."""
    f = _finite(value)
    if f is None:
        return "-"
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    text = f"{f:.{digits}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]  # no "-0.0000"
    return text


def fmt_pct(value: Any) -> str:
    """An accuracy in [0, 1] as a percentage with one decimal, e.g. `0.5633` -> `56.3%`."""
    f = _finite(value)
    if f is None or not math.isfinite(f):
        return fmt_float(value)
    return f"{100 * f:.1f}%"


def fmt_usd(value: Any) -> str:
    """USD with 6 decimals (replayed costs are fractions of a cent per example)."""
    f = _finite(value)
    if f is None or not math.isfinite(f):
        return fmt_float(value)
    return f"${f:.6f}"


def fmt_ms(value: Any) -> str:
    """Milliseconds with no decimals, e.g. `1234.5` -> `1235ms`."""
    f = _finite(value)
    if f is None or not math.isfinite(f):
        return fmt_float(value)
    return f"{f:.0f}ms"


def fmt_calls(requests: Any, input_tokens: Any, output_tokens: Any) -> str:
    """A model's requests and tokens, e.g. `3 requests, 2700 input + 240 output tokens`
    (a missing or not finite figure counts 0)."""
    n, tin, tout = (
        int(f) if (f := _finite(v)) is not None and math.isfinite(f) else 0
        for v in (requests, input_tokens, output_tokens)
    )
    return f"{n} request{'' if n == 1 else 's'}, {tin} input + {tout} output tokens"


def one_line(message: str) -> str:
    """A multi-line message as one line: list items joined with `;`, blank lines dropped.

    `"x is missing.\\nLooked in:\\n  - a: not found\\n  - b: failed"` becomes
    `"x is missing. Looked in: a: not found; b: failed"`.
    """
    out = ""
    for raw in message.splitlines():
        s = raw.strip()
        if not s:
            continue
        item = s.startswith("- ")
        if item:
            s = s[2:].strip()
        if not out:
            out = s
        elif out.endswith(":"):
            out += " " + s
        elif not item and out.endswith((".", ";", ",")):
            out += " " + s
        elif not item and s[:1].isupper():
            out += ". " + s
        else:
            out += "; " + s
    return out


class Output:
    """Where the command line prints: stdout for results, stderr for progress and notes.

    Args:
        stdout: the results stream (default `sys.stdout`).
        stderr: the progress and notes stream (default `sys.stderr`).
        rich_output: draw with rich (colour, boxes); default: when stdout is a terminal.
    """

    def __init__(
        self,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
        *,
        rich_output: bool | None = None,
    ) -> None:
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.rich = _isatty(self.stdout) if rich_output is None else rich_output
        self.console = Console(
            file=self.stdout,
            force_terminal=self.rich,
            no_color=not self.rich,
            highlight=False,
            soft_wrap=not self.rich,
            width=None if self.rich else 10_000,
        )
        self.err_console = Console(
            file=self.stderr, highlight=False, force_terminal=_isatty(self.stderr)
        )

    @property
    def progress_enabled(self) -> bool:
        """True when stderr is a terminal (progress bars are drawn only there)."""
        return _isatty(self.stderr)

    def line(self, text: str = "", *, style: str | None = None) -> None:
        """One line (or block) of text on stdout; `style` only applies on a terminal."""
        if self.rich:
            self.console.print(text, style=style, markup=False)
        else:
            self.stdout.write(text + "\n")
            self.stdout.flush()

    def heading(self, text: str) -> None:
        """A section heading: bold on a terminal, `== text ==` otherwise."""
        if self.rich:
            self.console.print()
            self.console.rule(text, style="bold")
        else:
            self.line(f"== {text} ==")

    def kv(self, pairs: Sequence[tuple[str, Any]]) -> None:
        """`key: value` lines, keys aligned."""
        width = max((len(k) for k, _ in pairs), default=0)
        for key, value in pairs:
            self.line(f"{key + ':':<{width + 1}} {value}")

    def json(self, data: Any) -> None:
        """Pretty JSON (2-space indent): highlighted on a terminal, plain otherwise."""
        text = json.dumps(data, indent=2, ensure_ascii=False)
        if self.rich:
            from rich.syntax import Syntax

            self.console.print(Syntax(text, "json", word_wrap=True, background_color="default"))
        else:
            self.line(text)

    def table(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        title: str | None = None,
        right: Sequence[str] = (),
        short: Mapping[str, str] | None = None,
    ) -> None:
        """A table: rich on a terminal; else a header and rows of two-space separated columns.

        Values are printed with `str`; None prints as `-`; a value holding spaces stays one
        column only on a terminal, so callers keep plain-mode cells free of spaces. `right`
        names the numeric columns (right-aligned, never cut); `short` gives shorter headers
        used on a terminal, where width is scarce. On a terminal, text columns wrap at word
        boundaries (a column is never narrower than its longest word, so no word is cut) and
        one space separates the columns.
        """
        cells = [["-" if v is None else str(v) for v in row] for row in rows]
        if self.rich:
            t = Table(
                title=title,
                title_justify="left",
                header_style="bold",
                box=box.SIMPLE_HEAD,
                padding=(0, 0),  # the box draws one space between columns: 80 columns fit
                pad_edge=False,
            )
            for i, c in enumerate(columns):
                # numbers never shrink (a cut number is wrong); text columns wrap at spaces,
                # never narrower than their longest word
                numeric = c in right
                label = (short or {}).get(c, c)
                if numeric:
                    width = max([len(label), *(len(row[i]) for row in cells)])
                else:
                    words = [len(w) for row in cells for w in row[i].split()]
                    width = max([len(label), *words])
                t.add_column(
                    label,
                    justify="right" if numeric else "left",
                    no_wrap=numeric,
                    min_width=width,
                    overflow="fold",
                )
            for row in cells:
                t.add_row(*row)
            self.console.print(t)
            return
        if title:
            self.line(f"== {title} ==")
        widths = [len(c) for c in columns]
        for row in cells:
            for i, v in enumerate(row):
                widths[i] = max(widths[i], len(v))
        self.line("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
        for row in cells:
            self.line("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())

    def note(self, text: str) -> None:
        """A note for the person at the terminal (stderr), e.g. where the journal is."""
        self.stderr.write(text + "\n")
        self.stderr.flush()

    def error(self, text: str) -> None:
        """The one error line (stderr)."""
        self.stderr.write(f"topology-studio: error: {one_line(text)}\n")
        self.stderr.flush()
