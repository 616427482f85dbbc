"""Offline Assistant's Qt layer: thin, owns threads, never computes."""
