"""CLI commands for kiosk administration:

    admin set-pin      read the new admin PIN twice (hidden), or one line from stdin when it
                       is not a terminal (scripted deployment), and store its hash
    admin clear-pin    remove the admin PIN
    admin audit [--tail N]   print the last N lines of the audit log (default 20)
    admin bundle keygen|build|verify|install|publish|rollback|status
                       index bundles (engine/fleet): build once, verify, install, roll back
"""

from __future__ import annotations

import getpass
import json
import sys
import time
from pathlib import Path

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
    _add_bundle_commands(actions)


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


# -- admin bundle ---------------------------------------------------------------------------------
def _add_bundle_commands(actions) -> None:
    bundle = actions.add_parser("bundle", help="index bundles: build once, verify, install, roll back")
    steps = bundle.add_subparsers(title="actions", metavar="ACTION")
    bundle.set_defaults(run=lambda args: usage(bundle))

    def action(name: str, help_text: str, run):
        parser = steps.add_parser(name, parents=[common_options()], help=help_text, description=help_text)
        parser.set_defaults(run=run)
        return parser

    keygen = action("keygen", "make a signing key; prints the public key for the kiosks' bundle_keys",
                    lambda args: _bundle_keygen(Path(args.private), args.public and Path(args.public)))
    keygen.add_argument("--private", "--out", dest="private", required=True, metavar="KEYFILE",
                        help="the private key file to write (mode 0600; an existing file is never overwritten)")
    keygen.add_argument("--public", default=None, metavar="FILE",
                        help="also write the public key here: the line kiosks trust (bundle_keys, --trust)")

    build = action("build", "build a signed bundle of a collection (a consistent snapshot)",
                   lambda args: _bundle_build(paths_of(args), args))
    build.add_argument("--collection", required=True, metavar="NAME")
    build.add_argument("--key", required=True, metavar="KEYFILE", help="the private key (admin bundle keygen)")
    build.add_argument("--out", required=True, metavar="FILE")
    build.add_argument("--version", type=int, default=None, metavar="N",
                       help="the bundle version (default: the last built here + 1)")

    trust = {"action": "append", "default": [], "metavar": "PUBKEY",
             "help": "trust this public key too (besides bundle_keys in the settings)"}
    verify = action("verify", "check a bundle's signature and every file's hash",
                    lambda args: _bundle_verify(paths_of(args), args))
    verify.add_argument("file", metavar="FILE")
    verify.add_argument("--trust", **trust)

    install = action("install", "verify a bundle, install it as a new version and switch to it",
                     lambda args: _bundle_install(paths_of(args), args))
    install.add_argument("file", metavar="FILE")
    install.add_argument("--trust", **trust)

    publish = action("publish", "unpack a bundle into a bundle source folder that kiosks watch",
                     lambda args: _bundle_publish(paths_of(args), args))
    publish.add_argument("file", metavar="FILE")
    publish.add_argument("source", metavar="SOURCE_DIR")
    publish.add_argument("--trust", **trust)

    back = action("rollback", "switch back to the previous installed version",
                  lambda args: _bundle_rollback(paths_of(args), args.collection))
    back.add_argument("--collection", default=None, metavar="NAME",
                      help="needed when several collections are installed from bundles")

    state = action("status", "the installed bundle versions", lambda args: _bundle_status(paths_of(args), args.json))
    state.add_argument("--json", action="store_true", help="print it as JSON")


def _bundle_keygen(private: Path, public: Path | None) -> int:
    from engine.fleet.bundle import generate_keys, public_key_text

    key = generate_keys(private, public)
    print(public_key_text(key))
    where = f"the line above (also in {public})" if public else "the line above"
    print(f"The private key is in {private} (keep it secret); put {where} in the kiosks' "
          "settings: bundle_keys = [\"...\"].", file=sys.stderr)
    return 0


def _bundle_build(paths, args) -> int:
    from engine.fleet.bundle import build_bundle, load_private_key

    started = time.perf_counter()
    manifest = build_bundle(paths, args.collection, load_private_key(args.key), Path(args.out), args.version)
    seconds = time.perf_counter() - started
    print(f"Built {args.out}: version {manifest.version} of '{manifest.collection}', "
          f"{sum(e.kind == 'document' for e in manifest.files)} documents, "
          f"{Path(args.out).stat().st_size / 1e6:.1f} MB in {seconds:.1f} s.")
    return 0


def _bundle_verify(paths, args) -> int:
    from engine.fleet.bundle import trusted_keys, verify_bundle

    manifest = verify_bundle(args.file, trusted_keys(paths, args.trust))
    print(f"{args.file} is good: version {manifest.version} of '{manifest.collection}', signed by "
          f"{manifest.signer or 'a trusted key'}, {len(manifest.objects())} objects checked "
          f"({manifest.total_bytes / 1e6:.1f} MB), embedder {manifest.embedder_id}, "
          f"reranker {manifest.reranker_id or 'none'}.")
    return 0


def _bundle_install(paths, args) -> int:
    from engine.fleet.bundle import install_bundle, trusted_keys

    started = time.perf_counter()
    folder = install_bundle(paths, args.file, trusted_keys(paths, args.trust))
    print(f"Installed {args.file} into {folder} and switched to it in {time.perf_counter() - started:.1f} s.")
    return 0


def _bundle_publish(paths, args) -> int:
    from engine.fleet.bundle import publish_bundle, trusted_keys

    manifest = publish_bundle(args.file, args.source, trusted_keys(paths, args.trust))
    print(f"Published version {manifest.version} of '{manifest.collection}' in {args.source}.")
    return 0


def _bundle_rollback(paths, collection: str | None) -> int:
    from engine.fleet.bundle import rollback

    version = rollback(paths, collection)
    print(f"Rolled back: version {version} is current.")
    return 0


def _bundle_status(paths, as_json: bool) -> int:
    from engine.fleet.bundle import status

    state = status(paths)
    if as_json:
        print(json.dumps(state, indent=1, sort_keys=True))
        return 0
    if not state["collections"]:
        print("No collection is installed from a bundle.")
    for name, entry in state["collections"].items():
        print(f"{name}: version {entry['current']} (previous: {entry['previous']}), created "
              f"{entry.get('created', '?')}, {entry.get('documents', '?')} documents, in {entry['folder']}")
    objects = state["objects"]
    print(f"{objects['count']} objects held ({objects['bytes'] / 1e6:.1f} MB).")
    return 0
