"""Kiosk mode in Qt: the lock-down, the admin PIN keypad, and the crash-loop safe mode."""
