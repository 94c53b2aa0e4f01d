"""The runtime page's (docs/runtime.md) offline runtime topology design example runs as written
and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_runtime_page_orchestrator_example_runs_offline() -> None:
    text = (REPO / "docs" / "runtime.md").read_text(encoding="utf-8")
    section = text[text.index("## Runtime topology design") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None
    out = subprocess.run(
        [sys.executable, "-c", found.group(1)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    assert out.stdout.splitlines() == [
        "FOUR designer False True",
        "FOUR cache True True",
        "hits=1 misses=1 stores=2 decays=0",
    ]
