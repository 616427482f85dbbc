"""The collection on disk: IndexStore (SQLite + FTS5 is the truth, faiss a checksummed cache),
vectors (the dense index: exact below a size, approximate IVF above it, re-scored exactly), the
Indexer that parses, chunks, embeds and stores documents, health (a collection's checks and
repair, and whether it exists at all: the CLI and the server both ask), portable (a document's
rows as an object of its own, as bundles carry them), and memory (freed memory given back to
the operating system after a large store is closed)."""
