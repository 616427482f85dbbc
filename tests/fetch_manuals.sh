#!/usr/bin/env bash
# Real manuals for the tests and benchmarks: Debian's r-doc-pdf (R-intro, R-admin, R-data,
# R-exts, R-lang, R-FAQ and the 2,415-page reference manual), unpacked into tests/.manuals.
# Needs apt (Debian/Ubuntu). Elsewhere the tests that need them skip, except under CI.
set -euo pipefail
cd "$(dirname "$0")"
target=.manuals
[ -f "$target/R-intro.pdf" ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "fetch_manuals: apt-get not found; tests on real manuals will be skipped" >&2
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download r-doc-pdf >/dev/null 2>&1) || {
  apt-get update -qq >/dev/null 2>&1 || true
  (cd "$work" && apt-get download r-doc-pdf >/dev/null)
}
dpkg-deb -x "$work"/r-doc-pdf_*.deb "$work/x"
mkdir -p "$target"
cp "$work"/x/usr/share/R/doc/manual/*.pdf "$target/"
rm -f "$target/fullrefman.pdf"  # the same file as refman.pdf
ls "$target"
