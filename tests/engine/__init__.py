"""Tests of engine/: plain pytest, no Qt."""
