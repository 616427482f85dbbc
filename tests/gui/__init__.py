"""Tests of desktop_app/: pytest-qt on the offscreen platform, and the app as a process."""
