"""The collection on disk: IndexStore (SQLite + FTS5 is the truth, faiss a checksummed cache)
and the Indexer that parses, chunks, embeds and stores documents."""
