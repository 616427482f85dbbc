"""Tests of desktop_app/controllers/: the worker-thread helper, the assistant's restart, remote engine
and bundle switch, the inbox watcher, and controllers freed at once."""
