"""Three short manuals in a real IndexStore, embedded with the tiny embedder, for fast tests of
the assistant and of QA measurement.

The manuals share no word with each other nor with the words questions are made of ("how",
"do", "I", "the", "and"), so that keyword search alone finds exactly the manual a question
names.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.encoders.embedder import Embedder
from engine.store.index_store import IndexStore
from engine.types import Chunk

MANUALS: dict[str, list[str]] = {  # path -> the text of each page
    "/manuals/filter.md": ["Replace filter cartridge yearly. Use part F-77 only."],
    "/manuals/oil.md": ["Oil level: check weekly with dipstick.",
                        "Drain old oil into tray. Dispose of it at a recycling point."],
    "/manuals/pump.md": ["Prime pump with water before start.",
                         "Error E-12 means motor overheated. Let motor cool thirty minutes."],
}


def fill(store: IndexStore, embedder: Embedder, manuals: dict[str, list[str]] = MANUALS) -> IndexStore:
    """Store each manual as one document with one chunk per page, embedded for real."""
    for path, pages in manuals.items():
        chunks = [Chunk(page=number, start=0, end=len(text), text=text)
                  for number, text in enumerate(pages, 1)]
        store.add_document(path, f"sha-{path}", size=sum(map(len, pages)), mtime=1.0,
                           title=Path(path).stem, page_count=len(pages), chunks=chunks,
                           embeddings=embedder.encode_documents(pages))
    return store


def add_file(store: IndexStore, embedder: Embedder, file: Path, text: str) -> None:
    """Writes `text` to `file` and stores it as one indexed page, with the file's real SHA-256
    (bundles and the server's document route check it)."""
    file.write_text(text, encoding="utf-8")
    store.add_document(str(file), hashlib.sha256(file.read_bytes()).hexdigest(), size=file.stat().st_size,
                       mtime=1.0, title=file.stem, page_count=1,
                       chunks=[Chunk(page=1, start=0, end=len(text), text=text)],
                       embeddings=embedder.encode_documents([text]))


def open_store(folder: Path, embedder: Embedder) -> IndexStore:
    return IndexStore.open(folder, embedder_id=embedder.model_id, dimension=embedder.dimension)
