"""The public surface of `core` is curated: pin it so a change is deliberate."""

import core
import core.errors


def test_every_error_is_exported_from_core() -> None:
    for name in core.errors.__all__:
        assert getattr(core, name) is getattr(core.errors, name)


def test_all_errors_derive_from_the_base() -> None:
    for name in core.errors.__all__:
        assert issubclass(getattr(core.errors, name), core.errors.TopologyStudioError)
