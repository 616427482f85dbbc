"""Tests of desktop_app/sources/: the source view opening a citation at its page."""
