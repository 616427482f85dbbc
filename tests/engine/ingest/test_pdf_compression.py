"""PDF streams in compressions other than Flate: Brotli is shipped and read; a damaged
compressed stream is "damaged", never "too large"; a compression nothing here can decode is
named, never answered with a pip command (issue 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import DocumentError
from engine.ingest.parse_pool import ParsePool
from engine.ingest.pdf import parse_pdf

CONTENT = b"BT /F1 12 Tf 20 100 Td (Brotli text) Tj ET"


def pdf_with_stream(path: Path, data: bytes, filter_name: str) -> Path:
    """A one-page PDF whose content stream is `data`, declared as compressed by `filter_name`."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /%s >>\nstream\n" % (len(data), filter_name.encode())
        + data + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


@pytest.fixture
def pool():
    with ParsePool(time_limit_s=30, memory_limit_mb=1024) as parse_pool:
        yield parse_pool


def test_brotli_streams_are_read(tmp_path, pool):
    import brotli  # a dependency of the app: pypdf decodes BrotliDecode with it

    path = pdf_with_stream(tmp_path / "brotli.pdf", brotli.compress(CONTENT), "BrotliDecode")
    assert [p.text for p in pool.parse(path).pages] == ["Brotli text"]


def test_a_damaged_112_byte_brotli_stream_is_damaged_not_too_large(tmp_path, pool):
    path = pdf_with_stream(tmp_path / "filled-background.pdf", b"\xff" * 112, "BrotliDecode")
    with pytest.raises(DocumentError) as raised:
        pool.parse(path)
    message = str(raised.value)
    assert raised.value.kind == "invalid"
    assert "too large" not in message and "Split" not in message
    assert "damaged" in message and "Brotli" in message


def test_a_damaged_flate_stream_is_named_damaged(tmp_path, pool):
    path = pdf_with_stream(tmp_path / "flate.pdf", b"\xff" * 112, "FlateDecode")
    with pytest.raises(DocumentError) as raised:
        pool.parse(path)
    assert raised.value.kind == "invalid" and "too large" not in str(raised.value)


def test_an_unknown_compression_is_named(tmp_path, pool):
    import zlib

    # data no reader can decode (PDFium, like a viewer, finds no text in it; pypdf names why)
    path = pdf_with_stream(tmp_path / "odd.pdf", zlib.compress(CONTENT), "FooDecode")
    with pytest.raises(DocumentError) as raised:
        pool.parse(path)
    assert "uses an unsupported compression (FooDecode)" in str(raised.value)
    assert raised.value.kind == "unsupported"


def test_a_missing_decoder_is_an_unsupported_compression_never_a_pip_command(tmp_path, monkeypatch):
    from pypdf.errors import DependencyError
    from pypdf.filters import BrotliDecode

    def missing(*_args, **_kwargs):
        raise DependencyError("brotli is required for BrotliDecode. Install it with: pip install pypdf[brotli]")

    monkeypatch.setattr(BrotliDecode, "decode", staticmethod(missing))
    path = pdf_with_stream(tmp_path / "brotli.pdf", b"\x00" * 16, "BrotliDecode")
    with pytest.raises(DocumentError) as raised:
        parse_pdf(path)
    message = str(raised.value)
    assert "uses an unsupported compression (BrotliDecode)" in message
    assert "pip" not in message
