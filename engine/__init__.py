"""Offline Assistant engine: everything the app does, without Qt."""

__version__ = "0.1.0"
