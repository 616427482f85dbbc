"""Developer tools, never part of the app: each has its own extra in pyproject.toml."""
