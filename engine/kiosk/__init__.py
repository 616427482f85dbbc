"""The kiosk's engine side: the admin PIN, the audit log sink, crash-loop detection and systemd's
sd_notify. The Qt lock-down itself is desktop_app.kiosk."""
