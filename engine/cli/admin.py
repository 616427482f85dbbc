"""CLI commands for kiosk administration:

    admin set-pin      read the new admin PIN twice (hidden), or one line from stdin when it
                       is not a terminal (scripted deployment), and store its hash
    admin clear-pin    remove the admin PIN
    admin audit [--tail N]   print the last N lines of the audit log (default 20)
"""

from __future__ import annotations

import getpass
import sys

from engine.cli.common import common_options, paths_of, usage
from engine.errors import EngineError
from engine.safe_text import visible


def add_commands(commands) -> None:
    admin = commands.add_parser("admin", help="kiosk administration: admin PIN, audit log")
    actions = admin.add_subparsers(title="actions", metavar="ACTION")
    admin.set_defaults(run=lambda args: usage(admin))

    set_pin = actions.add_parser(
        "set-pin", parents=[common_options()],
        help="set the admin PIN (4 to 12 digits); reads one line from stdin when piped")
    set_pin.set_defaults(run=lambda args: _set_pin(paths_of(args)))

    clear = actions.add_parser("clear-pin", parents=[common_options()], help="remove the admin PIN")
    clear.set_defaults(run=lambda args: _clear_pin(paths_of(args)))

    audit = actions.add_parser("audit", parents=[common_options()], help="print the end of the audit log")
    audit.add_argument("--tail", type=int, default=20, metavar="N",
                       help="how many of the latest records to print (default: 20)")
    audit.set_defaults(run=lambda args: _audit(paths_of(args), args.tail))


def _set_pin(paths) -> int:
    from engine.kiosk.admin_pin import set_pin

    pin = _read_pin()
    path = paths.pin_file
    set_pin(path, pin)
    print(f"The admin PIN is set (its hash is in {path}).")
    return 0


def _read_pin() -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("New admin PIN (4 to 12 digits): ")
    from engine.kiosk.admin_pin import check_policy

    check_policy(first)  # say so now, not after typing it twice
    if getpass.getpass("The same PIN again: ") != first:
        raise EngineError("The two PINs differ; nothing was changed. Run the command again.")
    return first


def _clear_pin(paths) -> int:
    from engine.kiosk.admin_pin import clear_pin

    path = paths.pin_file
    if clear_pin(path):
        print(f"The admin PIN is removed ({path}).")
    else:
        print(f"No admin PIN was set ({path} does not exist).")
    return 0


def _audit(paths, count: int) -> int:
    from engine.kiosk.audit import read_tail

    if count < 0:
        raise EngineError(f"--tail must be 0 or more, not {count}.")
    folder = paths.audit_folder
    lines = read_tail(folder, count)
    if not lines and count:
        print(f"The audit log is empty (no records in {folder}).", file=sys.stderr)
    for line in lines:
        print(visible(line))  # lines written before the audit log escaped everything
    return 0
