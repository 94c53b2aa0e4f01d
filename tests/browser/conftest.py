"""Browser-test plumbing: each test's outcome is kept on its node, so the page fixture can
screenshot a failing page to `test-artifacts/`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[Any]:
    del call
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
