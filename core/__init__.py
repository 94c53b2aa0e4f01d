"""Topology Studio's engine: the IR, runtime, hydration, evaluation, search and store.

Every public name of the design contract is importable from here directly. The list is curated
in `__all__` and pinned by `tests/test_public_api.py`.
"""

from core.errors import *  # noqa: F403
from core.errors import __all__ as _errors_all

__all__ = [*_errors_all]
