"""Reading an upload as it streams in: the multipart body is parsed a chunk
at a time (python-multipart), the file part written to a temporary file
while it is hashed and counted, and refused the moment it passes the size
limit or its first bytes are not a PDF's. Nothing is read whole into memory."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from python_multipart.multipart import MultipartParser, parse_options_header

PDF_MAGIC = b"%PDF-"
SNIFF = 1024  # a PDF's header may follow some junk, within its first kilobyte
MAX_FIELD = 256  # the mapping's name


class Refused(Exception):
    """The upload is refused: ``code`` (NOT_PDF, TOO_LARGE, ...) says why."""

    def __init__(self, code: str, status: int, detail: str) -> None:
        super().__init__(detail)
        self.code, self.status = code, status
        self.filename = ""  # the upload's name, when it got that far


@dataclass
class Upload:
    path: Path | None = None  # the temporary file holding the PDF
    filename: str = ""
    sha256: str = ""
    size: int = 0
    fields: dict[str, str] = field(default_factory=dict)


class _Reader:
    """python-multipart's callbacks, keeping the part being read."""

    def __init__(self, folder: Path, limit: int) -> None:
        self.folder, self.limit = folder, limit
        self.found = Upload()
        self.digest = hashlib.sha256()
        self.out: BinaryIO | None = None
        self._reset()

    def _reset(self) -> None:
        self.name, self.header, self.value = "", b"", b""
        self.headers: dict[bytes, bytes] = {}
        self.out = None

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        key = self.header.lower()
        self.headers[key] = self.headers.get(key, b"") + data[start:end]

    def on_header_end(self) -> None:
        self.header = b""

    def on_headers_finished(self) -> None:
        _, params = parse_options_header(self.headers.get(b"content-disposition", b""))
        self.name = params.get(b"name", b"").decode("utf-8", "replace")
        if b"filename" in params and self.found.path is None:
            self.found.filename = params[b"filename"].decode("utf-8", "replace")[:200]
            handle, name = tempfile.mkstemp(dir=self.folder, prefix=".upload-", suffix=".partial")
            self.found.path = Path(name)
            self.out = os.fdopen(handle, "wb")
            self.head = b""

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        piece = data[start:end]
        if self.out is None:
            self.value += piece
            if len(self.value) > MAX_FIELD:
                raise Refused("GW_4XX", 400, f"the field {self.name[:40]!r} is too long")
            return
        self.found.size += len(piece)
        if self.found.size > self.limit:
            raise Refused("TOO_LARGE", 413, f"the file is over {self.limit // (1024 * 1024)} MB")
        if len(self.head) < SNIFF:
            self.head += piece[:SNIFF]
            if len(self.head) >= SNIFF and PDF_MAGIC not in self.head:
                raise Refused("NOT_PDF", 400, "the file is not a PDF")
        self.digest.update(piece)
        self.out.write(piece)

    def on_part_end(self) -> None:
        if self.out is not None:
            self.out.close()
            if PDF_MAGIC not in self.head:
                raise Refused("NOT_PDF", 400, "the file is not a PDF")
        elif self.name:
            self.found.fields[self.name] = self.value.decode("utf-8", "replace")
        self._reset()

    def abandon(self) -> None:
        if self.out is not None:
            self.out.close()
        if self.found.path is not None:
            self.found.path.unlink(missing_ok=True)


async def receive(content_type: str, chunks: AsyncIterator[bytes], folder: Path, limit: int) -> Upload:
    """The upload's file (in a temporary file under ``folder``) and fields, or ``Refused``."""
    kind, options = parse_options_header(content_type or "")
    if kind != b"multipart/form-data" or b"boundary" not in options:
        raise Refused("NOT_PDF", 400, "send the file as multipart/form-data")
    folder.mkdir(parents=True, exist_ok=True)
    reader = _Reader(folder, limit)
    parser = MultipartParser(options[b"boundary"], {
        "on_header_field": reader.on_header_field, "on_header_value": reader.on_header_value,
        "on_header_end": reader.on_header_end, "on_headers_finished": reader.on_headers_finished,
        "on_part_data": reader.on_part_data, "on_part_end": reader.on_part_end})
    try:
        async for chunk in chunks:
            parser.write(chunk)
        parser.finalize()
    except BaseException as exc:
        reader.abandon()
        if isinstance(exc, Refused):
            exc.filename = reader.found.filename
        raise
    if reader.found.path is None:
        raise Refused("NOT_PDF", 400, "no file was sent (a form field named file)")
    reader.found.sha256 = reader.digest.hexdigest()
    return reader.found
