"""core.ir."""
