"""Pure view builders: DataFrames and specs in, figures and view data out (no `st.*` calls)."""
