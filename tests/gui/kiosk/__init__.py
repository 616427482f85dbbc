"""Tests of desktop_app/kiosk/: lockdown, the on-screen keyboard, safe mode, and the kiosk app in its own
process (its X session, the watchdog, the soak)."""
