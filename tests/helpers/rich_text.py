"""Reading what a QTextDocument shows, for GUI tests: the links it holds, in order."""

from __future__ import annotations


def anchor_hrefs(doc, until: tuple[str, ...] = ()) -> list[str]:
    """The href of every anchor in the document, in order; with `until`, only those above
    the first block whose whole text is one of those (a heading such as "Sources")."""
    found = []
    block = doc.begin()
    while block.isValid() and block.text() not in until:
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor():
                found.append(fmt.anchorHref())
            it += 1
        block = block.next()
    return found
