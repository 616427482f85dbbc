"""Tests of engine/evaluation/: QA sets and the scores eval reports on them."""
