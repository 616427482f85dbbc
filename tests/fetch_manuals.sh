#!/usr/bin/env bash
# Real manuals for the tests and benchmarks, from Debian's documentation packages, unpacked into
# tests/.manuals (one flat folder; each file's name says which program it documents):
#   r-doc-pdf            R-intro, R-admin, R-data, R-exts, R-lang, R-ints, R-FAQ and the
#                        2,415-page reference manual refman.pdf (a statistics language)
#   gnuplot-doc          gnuplot.pdf, 311 pages (a plotting program)
#   kicad-doc-en         kicad-eeschema.html and kicad-pcbnew.html, 71 + 59 pages as the app
#                        reads HTML (an EDA tool: schematic and board editors)
#   lilypond-doc-pdf     lilypond-learning.pdf and lilypond-usage.pdf, 221 + 73 pages
#                        (a music typesetter)
#   docbook-xsl-doc-pdf  docbook-xsl-reference.pdf, 95 pages (the stylesheets' parameters)
#   nut-doc              nut-user-manual.pdf, nut-FAQ.pdf, nut-cables.pdf, 135 + 21 + 12 pages
#                        (Network UPS Tools: UPS hardware, drivers, wiring)
#   debian-faq           debian-faq.pdf, 73 pages, made by xdvipdfmx (XeTeX): pypdf glues its
#                        words together ("DebianGNU/Linuxincludescomplete..."), PDFium does not
# gnuplot, kicad, lilypond and docbook-xsl are the wider development set's (tests/qa/dev_mixed.jsonl;
# about 52 MB of packages on top of r-doc-pdf's, 830 pages); nut-doc and debian-faq have sets of
# their own (tests/qa/dev_nut.jsonl, dev_debian_faq.jsonl; 3.4 MB more, 241 pages). Each family
# is fetched only when its files are missing.
# Needs apt (Debian/Ubuntu). Elsewhere the tests that need them skip, except under CI.
set -euo pipefail
cd "$(dirname "$0")"
target=.manuals
have_all() { local f; for f in "$@"; do [ -f "$target/$f" ] || return 1; done; }

if have_all R-intro.pdf gnuplot.pdf kicad-eeschema.html kicad-pcbnew.html \
    lilypond-learning.pdf lilypond-usage.pdf docbook-xsl-reference.pdf \
    nut-user-manual.pdf nut-FAQ.pdf nut-cables.pdf debian-faq.pdf; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "fetch_manuals: apt-get not found; tests on real manuals will be skipped" >&2
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
updated=
# unpack PKG: downloads the package (running apt-get update once if apt cannot find it) and
# unpacks it into $work/PKG.
unpack() {
  (cd "$work" && apt-get download "$1" >/dev/null 2>&1) || {
    if [ -z "$updated" ]; then apt-get update -qq >/dev/null 2>&1 || true; updated=1; fi
    (cd "$work" && apt-get download "$1" >/dev/null)
  }
  dpkg-deb -x "$work/$1"_*.deb "$work/$1"
  rm -f "$work/$1"_*.deb
}
mkdir -p "$target"

if ! have_all R-intro.pdf; then
  unpack r-doc-pdf
  cp "$work"/r-doc-pdf/usr/share/R/doc/manual/*.pdf "$target/"
  rm -f "$target/fullrefman.pdf"  # the same file as refman.pdf
fi

if ! have_all gnuplot.pdf; then
  unpack gnuplot-doc
  cp "$work"/gnuplot-doc/usr/share/doc/gnuplot/gnuplot.pdf "$target/gnuplot.pdf"
fi

if ! have_all kicad-eeschema.html kicad-pcbnew.html; then
  unpack kicad-doc-en
  help="$work"/kicad-doc-en/usr/share/doc/kicad/help/en
  cp "$help/eeschema.html" "$target/kicad-eeschema.html"
  cp "$help/pcbnew.html" "$target/kicad-pcbnew.html"
fi

if ! have_all lilypond-learning.pdf lilypond-usage.pdf; then
  unpack lilypond-doc-pdf
  docs="$work"/lilypond-doc-pdf/usr/share/doc/lilypond/html/Documentation
  cp "$docs/learning.pdf" "$target/lilypond-learning.pdf"
  cp "$docs/usage.pdf" "$target/lilypond-usage.pdf"
fi

if ! have_all docbook-xsl-reference.pdf; then
  unpack docbook-xsl-doc-pdf
  gzip -dc "$work"/docbook-xsl-doc-pdf/usr/share/doc/docbook-xsl-doc-pdf/doc/reference.pdf.gz \
    > "$target/docbook-xsl-reference.pdf"
fi

if ! have_all nut-user-manual.pdf nut-FAQ.pdf nut-cables.pdf; then
  unpack nut-doc
  for name in user-manual FAQ cables; do
    cp "$work/nut-doc/usr/share/doc/nut-doc/pdf/$name.pdf" "$target/nut-$name.pdf"
  done
fi

if ! have_all debian-faq.pdf; then
  unpack debian-faq
  gzip -dc "$work"/debian-faq/usr/share/doc/debian/FAQ/debian-faq.en.pdf.gz > "$target/debian-faq.pdf"
fi
ls "$target"
