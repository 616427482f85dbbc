"""The systemd notify client: real AF_UNIX datagrams, a no-op outside systemd, watchdog timing."""

from __future__ import annotations

import logging
import os
import socket
import sys
import uuid

import pytest

from engine.kiosk import sd_notify
from engine.kiosk.sd_notify import Notifier, watchdog_interval

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs AF_UNIX sockets")


@pytest.fixture
def listener(tmp_path, monkeypatch):
    """A datagram socket bound in tmp_path, as systemd's, with NOTIFY_SOCKET naming it."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    address = str(tmp_path / "notify")
    server.bind(address)
    server.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", address)
    yield server
    server.close()


def received(server: socket.socket) -> str:
    return server.recv(4096).decode("utf-8")


def test_each_message_arrives_as_one_datagram(listener):
    assert sd_notify.ready() and sd_notify.watchdog() and sd_notify.stopping()
    assert sd_notify.status("Indexing 3 of 7\nmanuals")
    assert [received(listener) for _ in range(4)] == [
        "READY=1", "WATCHDOG=1", "STOPPING=1", "STATUS=Indexing 3 of 7 manuals"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets are Linux only")
def test_an_abstract_socket_name_starting_with_at(monkeypatch):
    name = f"offline-assistant-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        with_address = Notifier("@" + name)
        assert sd_notify.watchdog() and with_address.ready()
        assert received(server) == "WATCHDOG=1" and received(server) == "READY=1"
        with_address.close()


def test_without_notify_socket_every_call_is_a_no_op(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert not any([sd_notify.ready(), sd_notify.watchdog(), sd_notify.status("x"), sd_notify.stopping()])


def test_a_vanished_socket_is_logged_once_and_never_raises(listener, tmp_path, caplog):
    notifier = Notifier(str(tmp_path / "notify"))
    assert notifier.watchdog() and received(listener) == "WATCHDOG=1"
    listener.close()
    os.unlink(tmp_path / "notify")  # systemd restarted: the socket is gone
    with caplog.at_level(logging.DEBUG, logger="engine.kiosk.sd_notify"):
        assert not notifier.watchdog() and not notifier.watchdog()
    assert len([r for r in caplog.records if r.name == "engine.kiosk.sd_notify"]) == 1
    notifier.close()


@pytest.mark.parametrize("env,interval", [
    ({"WATCHDOG_USEC": "30000000"}, 30.0),
    ({"WATCHDOG_USEC": "500000", "WATCHDOG_PID": str(os.getpid())}, 0.5),
    ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid() + 1)}, None),  # a parent's
    ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "x"}, None),
    ({"WATCHDOG_USEC": "0"}, None),
    ({"WATCHDOG_USEC": "soon"}, None),
    ({}, None),
])
def test_watchdog_interval(env, interval):
    assert watchdog_interval(env) == interval


def test_watchdog_interval_reads_the_environment_by_default(monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    assert watchdog_interval() == 2.0
