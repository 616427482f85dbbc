"""A tiny systemd notify client (sd_notify(3)) with no dependency, for the kiosk's watchdog.

    ready()             "READY=1": the window is up (with Type=notify, systemd waits for it)
    watchdog()          "WATCHDOG=1": send it from the GUI thread, so a frozen window stops it
    status(text)        "STATUS=...": shown by `systemctl status`
    stopping()          "STOPPING=1": a clean quit has begun
    watchdog_interval() WatchdogSec in seconds, or None: ping at half of it
    Notifier(address)   the same methods, for a given socket address (None: NOTIFY_SOCKET)

Each returns True when the message was sent. Without NOTIFY_SOCKET (not under systemd) each is
a cheap no-op returning False. Send errors (systemd restarted, the socket gone) are logged
once at debug level and swallowed: a kiosk must not crash because of its supervisor.
NOTIFY_SOCKET is a filesystem path, or an abstract socket name starting with '@'.

A user unit for the kiosk, as this client expects it (the paths and the flag are examples;
packaging owns the real file). The safe-mode screen must ping too, or systemd restarts it.
The app must be the unit's main process (a wrapper script must `exec` it; a one-folder build,
not PyInstaller's one-file one, whose bootloader is the parent): WATCHDOG_PID names it.

    [Unit]
    Description=Offline Assistant kiosk
    StartLimitIntervalSec=0
    [Service]
    Type=notify
    NotifyAccess=main
    ExecStart=/opt/offline-assistant/bin/offline-assistant --kiosk
    Restart=always
    RestartSec=2
    WatchdogSec=30
    [Install]
    WantedBy=graphical-session.target
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
from collections.abc import Mapping

log = logging.getLogger(__name__)


class Notifier:
    """Sends to `address`, or to NOTIFY_SOCKET as it is at each call when address is None."""

    def __init__(self, address: str | None = None):
        self.address = address
        self._socket: socket.socket | None = None
        self._lock = threading.Lock()
        self._warned = False

    def notify(self, message: str) -> bool:
        address = self.address if self.address is not None else os.environ.get("NOTIFY_SOCKET", "")
        if not address or not hasattr(socket, "AF_UNIX"):
            return False
        target = "\0" + address[1:] if address.startswith("@") else address
        try:
            with self._lock:
                if self._socket is None:
                    self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # not inherited
                self._socket.sendto(message.encode("utf-8"), target)
            return True
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.debug("could not notify systemd at %s (%s); further failures are silent", address, exc)
            return False

    def close(self) -> None:
        with self._lock:
            if self._socket is not None:
                self._socket.close()
                self._socket = None

    def ready(self) -> bool:
        return self.notify("READY=1")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.notify("STATUS=" + " ".join(str(text).splitlines()))  # one line: the protocol

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")


_default = Notifier()
atexit.register(_default.close)  # its socket lives as long as the process, and no longer


def ready() -> bool:
    return _default.ready()


def watchdog() -> bool:
    return _default.watchdog()


def status(text: str) -> bool:
    return _default.status(text)


def stopping() -> bool:
    return _default.stopping()


def watchdog_interval(environ: Mapping[str, str] | None = None) -> float | None:
    """WATCHDOG_USEC in seconds, when it is set for this process (WATCHDOG_PID, if set, must be
    ours: a child inheriting the variables must not think it is watched)."""
    env = os.environ if environ is None else environ
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
        if "WATCHDOG_PID" in env and int(env["WATCHDOG_PID"]) != os.getpid():
            return None
    except ValueError:
        return None
    return usec / 1_000_000 if usec > 0 else None
