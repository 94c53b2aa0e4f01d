"""Code, comments, docstrings, docs, tests and benchmarks say what a rule is and where its number
comes from, never which issue asked for it: a reader of the repository cannot see the issues."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
THIS_FILE = Path(__file__).resolve()
# every tree a reader reads, tests and benchmarks included: a test names the rule it pins, a
# benchmark the origin of its target
TREES = ("core", "studio", "pages", "docs", "tools", "tests", "bench")
FILES = ("README.md", "ARCHITECTURE.md", "mkdocs.yml", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".json"}
# the word issue (or issues) then a number, with or without "#", or an opening parenthesis, the
# word and a non-word character (a citation cut at a line's end); `[(]` keeps this line from
# matching itself
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\s*[0-9]|[(]issue\b", re.IGNORECASE)


def _texts() -> list[Path]:
    paths = [REPO / name for name in FILES if (REPO / name).is_file()]
    for tree in TREES:
        paths += [
            p
            for p in sorted((REPO / tree).rglob("*"))
            if p.is_file() and p.suffix in SUFFIXES and ".venv" not in p.parts
        ]
    return paths


def _offending_lines(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for n, line in enumerate(lines, 1)
        if ISSUE_NUMBER.search(line)
    ]


def test_the_pattern_finds_each_form_of_an_issue_number() -> None:
    # the samples are built from parts, so that this file holds no citation of its own
    issue = "issue"
    for text in (
        f"({issue} 17)",
        f"{issue.title()} 18, item 2",
        f"{issue} #13",
        f"{issue}s 12 and",
        f"x ({issue}\n",
        f"see {issue.upper()}#5",
    ):
        assert ISSUE_NUMBER.search(text), text
    for text in (
        "no static issue",
        "tuple(issues)",
        "an issue with the seed",
        "STATIC_ISSUE_CODES",
    ):
        assert not ISSUE_NUMBER.search(text), text


def test_this_file_does_not_match_its_own_pattern() -> None:
    assert _offending_lines(THIS_FILE) == []


def test_no_file_a_reader_reads_cites_an_issue_number() -> None:
    texts = _texts()
    found = [line for path in texts for line in _offending_lines(path)]
    assert found == []
    assert THIS_FILE in texts  # this test's own file is read like any other
    # every tree was read (a wrong root or a renamed tree would find nothing)
    assert [t for t in TREES if not any(p.is_relative_to(REPO / t) for p in texts)] == []
    assert len(texts) > 400
