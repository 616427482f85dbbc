"""Tests of engine/: plain pytest, no Qt. One folder per engine package; here the tests of the shared
top-level modules and those across packages (layout, no Qt, full disk, hostile text, page labels, dev sets)."""
