"""Reading the CLI's printed output in tests: its `== Title ==` sections and `key: value` lines.

Imported by the tests beside it (pytest puts this folder on `sys.path`: it has no
`__init__.py`)."""

from __future__ import annotations


def section(stdout: str, title: str) -> list[str]:
    """The lines under `== title ==`, up to the next `== ... ==` heading.

    Raises:
        ValueError: no such heading in `stdout`.
    """
    lines = stdout.splitlines()
    start = lines.index(f"== {title} ==") + 1
    out: list[str] = []
    for line in lines[start:]:
        if line.startswith("== "):
            break
        out.append(line)
    return out


def kv(stdout: str, key: str) -> str:
    """The value of the first `key: value` line.

    Raises:
        AssertionError: no such line (the message shows the output).
    """
    for line in stdout.splitlines():
        if line.startswith(f"{key}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {key!r} line in:\n{stdout}")
