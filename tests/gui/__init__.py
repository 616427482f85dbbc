"""Tests of desktop_app/: pytest-qt on the offscreen platform, and the app as a process. One folder per
desktop_app package; here the tests of the top-level modules (app, main_window, gui_gc, system_libs)
and of the whole window or app (its start, a full disk, SIGTERM, X11, scanned manuals end to end)."""
