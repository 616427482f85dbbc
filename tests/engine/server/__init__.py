"""Tests of engine/server/: the HTTP server's routes, pool, security and remote engine."""
