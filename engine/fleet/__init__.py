"""Index bundles: built once by an administrator, verified, installed and switched atomically
on every kiosk. No Qt here.

    manifest.py  the manifest and its Ed25519 signature
    snapshot.py  building a bundle from a consistent snapshot of a collection
    bundle.py    keys, reading and verifying bundles, publishing to a source; the public API
    kiosk.py     installing a version, switching, rolling back, status
    assembly.py  a version's collection from its rows, on top of the version held or from scratch
    records.py   the bundle audit log (DATA/audit/bundles.jsonl)
    source.py, watcher.py   watching a bundle source (a folder or an http(s) URL)
"""
