"""Finding a cited passage in a page's text that was extracted differently."""

from __future__ import annotations

import pytest

from engine.ingest.locate import locate_passage, same_letters


@pytest.mark.parametrize("haystack, passage, expected", [
    ("alpha beta gamma", "beta", "beta"),
    ("the ﬁlter is clogged", "the filter is clogged", "the ﬁlter is clogged"),
    ("replace the re-\r\nsistor now", "replace the resistor now", "replace the re-\r\nsistor now"),
    ("Intro. Step one: open the valve and wait", "Step one: open the valve and wait. Step two: "
     "close it again after ten minutes", "Step one: open the valve and wait"),
])
def test_locate_passage_compares_letters_and_digits(haystack, passage, expected):
    where = locate_passage(haystack, passage)
    assert where is not None
    assert haystack[where[0]:where[1]] == expected


def test_locate_passage_finds_a_passage_by_its_end_when_its_start_differs():
    page = "xx header xx The oil level must be between the two marks on the dipstick. yy"
    passage = "[garbled start] level must be between the two marks on the dipstick."
    start, end = locate_passage(page, passage)
    assert page[start:end] == "level must be between the two marks on the dipstick"


def test_locate_passage_says_none_when_it_is_not_there():
    assert locate_passage("alpha beta gamma", "delta epsilon zeta eta theta") is None
    assert locate_passage("", "x") is None
    assert locate_passage("abc", "   ") is None


def test_same_letters_says_whether_a_stored_span_still_fits_the_file():
    assert same_letters("Swap the\n*air filter*  every month.", "swap the air filter every month")
    assert not same_letters("Swap the oil filter every month.", "Swap the air filter every month.")
    assert not same_letters("", "")
