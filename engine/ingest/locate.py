"""Finding a passage in a page's text as a viewer holds it (text -> character range).

The index holds a PDF page's text as PDFium reads it, cleaned (engine.ingest.pdf_text); the
source view holds PDFium's raw text of the same page (QtPdf). `span_on_page` cleans the raw
text the same way and takes the passage's stored span: PDFium's very characters of the quote,
checked letter for letter. Where that check fails (a collection indexed with pypdf's text, a
saved conversation, another PDFium version) `locate_passage` finds the passage by its letters,
comparing letters and digits only (other spaces, line breaks, hyphens and ligatures).

    first, last = span_on_page(raw_page_text, span.start, span.end, passage.text)   # or None
    start, end = locate_passage(page_text, passage.text)   # or None when it is not there
"""

from __future__ import annotations

import unicodedata

from engine.ingest.pdf_text import HyphenWords, PageText

MIN_KEY_CHARS = 6  # shorter passages must match exactly
MAX_SHIFT = 8  # characters a span may have moved: hyphens at line ends decided otherwise before it


def _key(text: str, start: int = 0, end: int | None = None) -> tuple[str, list[int]]:
    """The letters and digits of text[start:end], case-folded and NFKC-normalised (so 'ﬁ' is
    'fi'), and for each of them the index of the character it came from."""
    end = len(text) if end is None else end
    chars: list[str] = []
    index: list[int] = []
    for i in range(start, end):
        ch = text[i]
        if ch.isascii():
            if ch.isalnum():
                chars.append(ch.lower())
                index.append(i)
            continue
        for c in unicodedata.normalize("NFKC", ch).casefold():
            if c.isalnum():
                chars.append(c)
                index.append(i)
    return "".join(chars), index


def _anchor(hkey: str, pkey: str, from_end: bool, after: int = 0) -> tuple[int, int] | None:
    """(position in hkey, offset in pkey) of the first piece of pkey found in hkey, trying long
    pieces first; from the passage's end (the match's end position) when from_end."""
    length = len(pkey)
    for size in (48, 24, 12):
        if size > length:
            continue
        reach = max(1, int(length * 0.6))
        for offset in range(0, min(reach, length - size + 1), max(1, size // 2)):
            first = length - offset - size if from_end else offset
            piece = pkey[first:first + size]
            at = hkey.find(piece, after)
            if at < 0:
                continue
            if size < 24 and hkey.find(piece, at + 1) >= 0:
                continue  # a short piece must be unique on the page to be trusted
            return (at + size, offset) if from_end else (at, offset)
    return None


def locate_passage(haystack: str, passage: str, start: int = 0,
                   end: int | None = None) -> tuple[int, int] | None:
    """Where `passage` lies in haystack[start:end], as (first, last + 1) indices of haystack,
    comparing letters and digits only. A passage that runs on past the end (onto the next
    page) or differs in places is still found by its beginning or its end; None when neither
    is there."""
    end = len(haystack) if end is None else end
    exact = passage.strip()
    if exact:
        at = haystack.find(exact, start, end)
        if at >= 0:
            return at, at + len(exact)
    hkey, hindex = _key(haystack, start, end)
    pkey, _ = _key(passage)
    if not hkey or not pkey:
        return None
    at = hkey.find(pkey)
    if at >= 0:
        return hindex[at], hindex[at + len(pkey) - 1] + 1
    if len(pkey) < MIN_KEY_CHARS:
        return None
    head = _anchor(hkey, pkey, from_end=False)
    tail = _anchor(hkey, pkey, from_end=True, after=head[0] if head else 0)
    if head is None and tail is None:
        return None
    if head is not None:
        first = head[0]
        last = tail[0] if tail else min(len(hkey), first + len(pkey) - head[1])
    else:
        last = tail[0]
        first = max(0, last - (len(pkey) - tail[1]))
    last = min(last, first + len(pkey) + len(pkey) // 4)  # never much longer than the passage
    if last <= first:
        return None
    return hindex[first], hindex[last - 1] + 1


def same_letters(text: str, passage: str) -> bool:
    """Whether `text` holds exactly the passage's letters and digits: a stored span still fits
    the file (it was not changed since it was indexed)."""
    return bool(passage.strip()) and _key(text)[0] == _key(passage)[0]


def span_on_page(raw: str, start: int, end: int, passage: str) -> tuple[int, int] | None:
    """PDFium's characters [first, last + 1) of raw page text `raw` that hold the stored span
    [start, end) of the page's cleaned text, when its letters are the passage's (all of them,
    or the part on this page of a passage over two pages); None when they are not there.

    The index decided each hyphen at a line end from the whole document's words; this page
    alone may decide one otherwise before the span, which moves it by a character or two:
    the span is looked for that far either side."""
    pkey, _ = _key(passage)
    if not pkey or end <= start:
        return None
    page = PageText.clean(raw, HyphenWords([passage]))  # the passage's own words decide its hyphens
    windows = [(start + shift, end + shift) for shift in sorted(range(-MAX_SHIFT, MAX_SHIFT + 1), key=abs)
               if start + shift >= 0 and end + shift <= len(page.text)]
    keys = [_key(page.text, first, last)[0] for first, last in windows]
    for (first, last), key in zip(windows, keys):
        if key == pkey:
            return page.raw_range(first, last)
    for (first, last), key in zip(windows, keys):  # the part on this page of a longer passage
        if len(key) >= MIN_KEY_CHARS and (pkey.startswith(key) or pkey.endswith(key)) \
                and _whole_words(page.text, first, last):
            return page.raw_range(first, last)
    return None


def _whole_words(text: str, first: int, last: int) -> bool:
    """Whether text[first:last] cuts no word in two."""
    return (first == 0 or not text[first - 1].isalnum() or not text[first].isalnum()) and \
        (last == len(text) or not text[last].isalnum() or not text[last - 1].isalnum())
