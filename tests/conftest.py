"""The one fallback rule for the datasets every GSM8K test needs, so the README's test command runs
all of them.

`TOPOLOGY_STUDIO_DATASETS` keeps the value it has; unset, it is the `shared/datasets` folder
beside the checkout (`<checkout>/../shared/datasets`), the same rule `.ci/run` uses. So the
README's `python -m pytest` runs every GSM8K test, and a test that needs the data fails
(with the loader's message saying where it looked) rather than skips when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.problems import DATASETS_ENV

REPO = Path(__file__).resolve().parents[1]

pytest_plugins = ["tests.fixtures.openai_server"]  # the `openai_server` fixture (loopback)

if not os.environ.get(DATASETS_ENV, "").strip():
    os.environ[DATASETS_ENV] = str(REPO.parent / "shared" / "datasets")
