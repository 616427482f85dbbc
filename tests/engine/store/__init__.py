"""Tests of engine/store/: the collection store, the indexer, damage repair and crash safety."""
