"""Code, comments, docstrings and docs say what a rule is and where its number comes from, never
which issue asked for it: a reader of the repository cannot see the issues."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the trees a reader reads (tests are left out: they may name the case they were written for)
TREES = ("core", "studio", "pages", "docs", "tools")
FILES = ("README.md", "ARCHITECTURE.md", "mkdocs.yml", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".json"}
# "issue 3", "Issue 18, item 2", "issue #13", "issues 12 and 15", "(issue" at a line's end
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\s*[0-9]|\(issue\b", re.IGNORECASE)


def _texts() -> list[Path]:
    paths = [REPO / name for name in FILES if (REPO / name).is_file()]
    for tree in TREES:
        paths += [
            p
            for p in sorted((REPO / tree).rglob("*"))
            if p.is_file() and p.suffix in SUFFIXES and ".venv" not in p.parts
        ]
    return paths


def test_the_pattern_finds_each_form_of_an_issue_number() -> None:
    for text in ("(issue 17)", "Issue 18, item 2", "issue #13", "issues 12 and", "x (issue\n"):
        assert ISSUE_NUMBER.search(text), text
    for text in ("no static issue", "tuple(issues)", "an issue with the seed"):
        assert not ISSUE_NUMBER.search(text), text


def test_no_file_a_reader_reads_cites_an_issue_number() -> None:
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in _texts()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ISSUE_NUMBER.search(line)
    ]
    assert found == []
    assert len(_texts()) > 150  # the trees were read (a wrong root would find nothing)
