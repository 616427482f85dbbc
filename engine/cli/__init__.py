"""offline-assistant-cli: main builds the parser; one module per command group (models, generate,
index, admin, ask); common holds what they share (paths, Ctrl-C, exit codes, progress)."""
