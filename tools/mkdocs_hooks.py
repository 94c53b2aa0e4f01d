"""MkDocs hook (`hooks:` in mkdocs.yml): adds the generated `cli.md`, the command-line
reference, to the site's files.

The page's text comes from `tools/cli_reference.py`, which renders `studio.cli.build_parser()`,
so a new command or option is on the site the next time it is built.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]


def on_files(files: Files, config: Any) -> Files:
    """Add `cli.md`, rendered from the parser, to the files MkDocs builds."""
    sys.path.insert(0, str(REPO))
    try:
        from studio.cli import build_parser
        from tools.cli_reference import render
    finally:
        sys.path.remove(str(REPO))
    files.append(File.generated(config, "cli.md", content=render(build_parser())))
    return files
