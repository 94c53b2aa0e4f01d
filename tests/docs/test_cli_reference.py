"""The generated command-line reference (`tools/cli_reference.py`, built into the site's
`cli.md` by `tools/mkdocs_hooks.py`) has a section for every command of the parser."""

from __future__ import annotations

import argparse
import os
import re

import pytest

from studio.cli import build_parser
from tools.cli_reference import HELP_COLUMNS, render, subcommands


def _names(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    """Every command of `parser`, read from argparse independently of `subcommands`."""
    out: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append(prefix + name)
                out += _names(sub, prefix + name + " ")
    return out


def test_every_command_and_nested_command_has_its_section() -> None:
    parser = build_parser()
    page = render(parser)
    sections = re.findall(r"^## (.+)$", page, re.M)
    assert sections == _names(parser)
    # the commands the CLI has today, so a command lost from the page is seen by name
    for name in ("search", "evaluate", "sweep", "runs", "show", "diff", "apply", "store rebuild"):
        assert name in sections


def test_each_section_is_that_command_s_help() -> None:
    parser = build_parser()
    page = render(parser)
    for name, sub in subcommands(parser):
        body = page.split(f"\n## {name}\n", 1)[1]
        usage = body.split("```text\n", 1)[1].splitlines()[0]
        assert usage.startswith(f"usage: {sub.prog}")


def test_the_page_is_wrapped_at_its_own_width_whatever_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", str(HELP_COLUMNS))
    expected = build_parser().format_help().rstrip()
    monkeypatch.setenv("COLUMNS", "40")
    narrow = render(build_parser())
    assert narrow.split("```text\n", 1)[1].split("\n```", 1)[0] == expected
    monkeypatch.setenv("COLUMNS", "200")
    assert render(build_parser()) == narrow
    assert os.environ["COLUMNS"] == "200"  # set back after the render
