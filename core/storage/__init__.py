"""core.storage."""
