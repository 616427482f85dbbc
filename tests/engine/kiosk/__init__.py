"""Tests of engine/kiosk/: the admin PIN, the audit log, crash-loop detection and sd_notify."""
