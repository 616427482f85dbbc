"""Tests of engine/ingest/: each format, OCR, chunking, discovering files, the parse pool, the inbox."""
