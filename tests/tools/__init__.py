"""Tests of the developer tools in tools/."""
