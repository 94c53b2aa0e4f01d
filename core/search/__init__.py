"""core.search."""
