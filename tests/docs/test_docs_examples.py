"""The docs' and the README's offline examples run as written and print what their comments
say: each is the first Python block under its heading, run in a fresh interpreter from the
repository root."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run_example(page: str, heading: str) -> list[str]:
    text = (REPO / page).read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(found.group(1))],  # a block in a list is indented
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return out.stdout.splitlines()


@pytest.mark.parametrize(
    ("page", "heading", "printed"),
    [
        (
            "docs/runtime.md",
            "## Agents designed per request",
            ["2/2 subtasks succeeded", "['investigate_specialist', 'remediate_specialist']"],
        ),
        (
            "docs/runtime.md",
            "## Runtime topology design",
            [
                "FOUR designer False True",
                "FOUR cache True True",
                "hits=1 misses=1 stores=2 decays=0",
            ],
        ),
        ("docs/getting-started.md", "## The engine in code", ["HI"]),
        ("README.md", "## A five-minute tour", ["HI"]),
    ],
)
def test_the_example_runs_offline_and_prints_what_it_says(
    page: str, heading: str, printed: list[str]
) -> None:
    assert _run_example(page, heading) == printed
