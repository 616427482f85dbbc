"""Tests of engine/cli/: offline-assistant-cli's commands as a person runs them, and their exit codes."""
