"""Offline Assistant's Qt layer: thin, owns threads, never computes.

app and main_window put it together; controllers/ run the engine off the GUI thread (the only
owners of threads); chat/, sources/ and panels/ show what the engine gives; kiosk/ locks it down.
"""
