"""The kiosk window's guard against other X clients: in the kiosk session there is no window
manager, so any program on the display may destroy or unmap our window (`xdotool windowclose`,
XDestroyWindow, XUnmapWindow), and the app would run on with nothing on the screen.

    guard = WindowGuard(window, is_ours=lambda: kiosk.state != "off", on_lost=restart)
    QApplication.instance().installNativeEventFilter(guard)

An unmapped window is mapped again at once; a destroyed one cannot come back, so `on_lost` is
called (the kiosk quits with WINDOW_LOST_EXIT_CODE and the session or systemd starts it again).
Only on X11 (xcb); elsewhere it sees no X events and does nothing. keyboard_follows_pointer()
gives the keys to the window under the pointer (ours, full screen), whatever window had them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

from PySide6.QtCore import QAbstractNativeEventFilter, QTimer
from PySide6.QtGui import QGuiApplication

log = logging.getLogger(__name__)

SESSION_ENV = "OFFLINE_ASSISTANT_KIOSK_SESSION"
WINDOW_LOST_EXIT_CODE = 70  # EX_SOFTWARE: not a crash of ours, but the app must start again
XCB_EVENT = b"xcb_generic_event_t"
DESTROY_NOTIFY = 17
UNMAP_NOTIFY = 18
# xcb_destroy_notify_event_t and xcb_unmap_notify_event_t: response_type (1 byte), pad (1),
# sequence (2), event (4), window (4)
WINDOW_OFFSET = 8
POINTER_ROOT = 1  # X.h's PointerRoot, RevertToPointerRoot, CurrentTime
REVERT_TO_POINTER_ROOT = 1
CURRENT_TIME = 0


def in_kiosk_session() -> bool:
    """Whether the app runs in the kiosk's X session (packaging/linux/offline-assistant-kiosk-session
    sets SESSION_ENV), where no window manager places, sizes or focuses its window."""
    return QGuiApplication.platformName() == "xcb" and os.environ.get(SESSION_ENV) == "1"


def keyboard_follows_pointer() -> bool:
    """Sets the X server's keyboard focus to PointerRoot: the keys go to the window under the
    pointer, our full-screen window. With no window manager the focus otherwise stays where the
    last window left it: on the root window once a window of ours is gone, and the next app's
    window never gets a key. True when done (X11 only)."""
    name = ctypes.util.find_library("X11")
    if name is None:
        return False
    xlib = ctypes.cdll.LoadLibrary(name)
    xlib.XOpenDisplay.restype = ctypes.c_void_p
    xlib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    xlib.XSetInputFocus.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_ulong]
    xlib.XCloseDisplay.argtypes = [ctypes.c_void_p]
    display = xlib.XOpenDisplay(None)
    if not display:
        return False
    try:
        xlib.XSetInputFocus(display, POINTER_ROOT, REVERT_TO_POINTER_ROOT, CURRENT_TIME)
    finally:
        xlib.XCloseDisplay(display)  # flushes the request
    return True


class WindowGuard(QAbstractNativeEventFilter):
    """Watches the X events for the destruction or unmapping of `window`'s own X window while
    `is_ours()` says the kiosk holds it (not while Qt itself recreates it, e.g. on a frame change)."""

    def __init__(self, window, *, is_ours, on_lost):
        super().__init__()
        self.window = window
        self.is_ours = is_ours
        self.on_lost = on_lost
        self.lost = False
        self._own_unmaps = 0  # those of _map_again's hide(): not another client's

    def nativeEventFilter(self, event_type, message):  # noqa: N802
        if event_type != XCB_EVENT or self.lost:
            return False, 0
        address = int(message)
        kind = ctypes.c_uint8.from_address(address).value & 0x7F  # the top bit: sent by a client
        if kind not in (DESTROY_NOTIFY, UNMAP_NOTIFY):
            return False, 0
        target = ctypes.c_uint32.from_address(address + WINDOW_OFFSET).value
        if not self.is_ours() or not self.window.isVisible() or target != int(self.window.winId()):
            return False, 0
        if kind == UNMAP_NOTIFY and self._own_unmaps:
            self._own_unmaps -= 1
            return False, 0
        if kind == DESTROY_NOTIFY:
            self.lost = True
            log.error("kiosk: another X client destroyed the window; the app starts again")
            QTimer.singleShot(0, self.on_lost)
        else:
            log.warning("kiosk: another X client unmapped the window; it is shown again")
            QTimer.singleShot(0, self._map_again)
        return False, 0

    def _map_again(self) -> None:
        w = self.window
        if self.is_ours() and w.isVisible():
            self._own_unmaps += 1
            w.hide()  # Qt still counts it as shown: a hide and a show map it again
            w.showFullScreen()
            if in_kiosk_session():
                keyboard_follows_pointer()
            w.activateWindow()
