"""The command-line reference page, generated from `studio.cli.build_parser()`.

The documentation site builds `cli.md` from this at build time (`docs/hooks/cli_reference.py`,
a MkDocs hook), so the page is the parser's own `--help` text and cannot drift from it. Run as
a script it prints the page: `python tools/cli_reference.py > /tmp/cli.md`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator

# argparse wraps its help at the terminal's width; the page is wrapped at one fixed width so
# every build gives the same text (100 columns, the project's line length).
HELP_COLUMNS = 100


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command and nested command of `parser`, depth first, as `("store rebuild", its
    parser)`; aliases are not listed twice."""
    for action in parser._actions:  # argparse exposes its sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                yield name, sub
                for nested, deeper in subcommands(sub):
                    yield f"{name} {nested}", deeper


def render(parser: argparse.ArgumentParser) -> str:
    """The reference page as Markdown: the top-level help, then one section per command
    (`## search`, `## store rebuild`, ...) holding its `--help` text."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_COLUMNS)
    try:
        parts = [
            "# Command-line reference",
            "",
            f"Generated from the parser of `{parser.prog}` when this site is built: each section"
            " is the command's own `--help`.",
            "",
            "```text",
            parser.format_help().rstrip(),
            "```",
        ]
        for name, sub in subcommands(parser):
            parts += ["", f"## {name}", "", "```text", sub.format_help().rstrip(), "```"]
        return "\n".join(parts) + "\n"
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


if __name__ == "__main__":
    from studio.cli import build_parser

    print(render(build_parser()), end="")
