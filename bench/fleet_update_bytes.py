"""Bytes a kiosk fetches for a one-document change, measured on a bundle of real size.

    .venv/bin/offline-assistant-cli index --data-dir /tmp/big200/admin --no-ocr DOCS...
    .venv/bin/python bench/fleet_update_bytes.py --admin-data /tmp/big200/admin --json out.json

The 'default' collection of --admin-data (indexed beforehand: indexing 200 MB is the slow part)
is copied, built into a signed bundle (version 1) and published into a source served over HTTP on
loopback (tests/helpers/static_server.py, Range-capable). One kiosk, a BundleWatcher over that
URL as the app makes it from its settings, installs version 1. Then the administrator adds one
short service note (or --add FILE; indexed by the engine), publishes version 2, and the kiosk
polls once more.

Reported: each bundle's bytes by kind (documents, rows, index), what the kiosk's watcher
counted and what the server sent for the update, and the update's new objects by kind.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fleet_kiosks import Admin  # noqa: E402  (the fleet bench's administrator: copy, index, publish)


def by_kind(entries) -> dict:
    """Bytes per kind (document, rows, index) of manifest entries, and their total."""
    sizes: dict = {}
    for entry in entries:
        sizes[entry.kind] = sizes.get(entry.kind, 0) + entry.size
    return {**dict(sorted(sizes.items())), "total": sum(sizes.values())}


def poll(watcher, server) -> dict:
    """One poll of the kiosk's watcher: what it installed and the bytes it and the server saw."""
    sent, started = server.bytes_sent, time.monotonic()
    result = watcher.poll_once()
    if result.outcome != "installed":
        raise SystemExit(f"the kiosk did not install: {result.outcome} {result.detail}")
    return {"version": result.version, "seconds": round(time.monotonic() - started, 1),
            "kiosk_bytes_downloaded": result.bytes_moved, "objects_downloaded": result.objects_moved,
            "server_bytes_sent": server.bytes_sent - sent}


def measure(admin: Admin, kiosk_data: Path, add: Path | None) -> dict:
    from engine.fleet.source import open_source
    from engine.fleet.watcher import BundleWatcher
    from engine.paths import AppPaths
    from tests.helpers.static_server import static_server

    first = admin.publish()
    with static_server(admin.source, ranges=True) as server:
        watcher = BundleWatcher(AppPaths(kiosk_data).ensure(), open_source(server.url), [admin.public])
        try:
            install = poll(watcher, server)
            admin.index([add]) if add else admin.add_manual()
            second = admin.publish()
            update = poll(watcher, server)
        finally:
            watcher.close()
    held = set(first["manifest"].objects())
    new = [e for sha, e in second["manifest"].objects().items() if sha not in held]
    return {"bundle_v1_bytes": by_kind(first["manifest"].objects().values()),
            "bundle_v2_bytes": by_kind(second["manifest"].objects().values()),
            "documents_v1": sum(e.kind == "document" for e in first["manifest"].files),
            "build_publish_s": [first["build_publish_s"], second["build_publish_s"]],
            "first_install": install, "update": update,
            "update_new_objects_bytes": by_kind(new),
            "update_new_objects": [(e.name, e.kind, e.size) for e in new]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-data", required=True, help="a data dir whose 'default' collection is bundled")
    parser.add_argument("--add", help="the document the update adds (default: a 101-byte service note)")
    parser.add_argument("--work", default="/tmp/fleet-update-bytes")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    if not (Path(args.admin_data) / "collections" / "default").is_dir():
        parser.error(f"{args.admin_data} has no 'default' collection; index the documents into it first")
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    figures = measure(Admin(work, Path(args.admin_data)), work / "kiosk", args.add and Path(args.add).resolve())
    text = json.dumps(figures, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
