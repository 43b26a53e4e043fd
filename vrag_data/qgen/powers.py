"""Powers the text layer flattens: a page prints 2^17 (the exponent set in superscript) and its plain text reads
"217"; a table cell or a blank asked from that text has a wrong gold ("217" for 131072). The PDF's spans say which
digits are set in superscript (PyMuPDF's span flag 1), so the flattened strings of a page are known and a question
whose answer or asked value holds one is not made."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

SUPERSCRIPT = 1  # PyMuPDF span flag


def flattened_powers(pdf_path: str, page_no: int) -> frozenset[str]:
    """Each base and exponent as the plain text reads them run together ("217" for 2^17, "1018" for 10^18) on a
    page of a local PDF; empty when the file is not readable here (a moved source)."""
    path = Path(pdf_path)
    if not pdf_path or not path.is_file():
        return frozenset()
    stat = path.stat()
    return _read(str(path), page_no, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4096)  # one small set per page
def _read(pdf_path: str, page_no: int, mtime_ns: int, size: int) -> frozenset[str]:  # noqa: ARG001
    from vrag_data.ingest.render import import_pymupdf

    pymupdf = import_pymupdf(layout=False)
    out: set[str] = set()
    try:
        with pymupdf.open(pdf_path) as doc:
            if not 1 <= page_no <= doc.page_count:
                return frozenset()
            for block in doc[page_no - 1].get_text("dict")["blocks"]:
                for line in block.get("lines", []):
                    spans = line["spans"]
                    for a, b in zip(spans, spans[1:]):
                        base = re.search(r"\d+$", a["text"])
                        exp = re.match(r"[\u2212-]?\d+", b["text"].strip())
                        if base and exp and b["flags"] & SUPERSCRIPT and not a["flags"] & SUPERSCRIPT:
                            out.add(base.group(0) + exp.group(0).lstrip("\u2212-"))
    except (RuntimeError, ValueError):
        return frozenset()
    return frozenset(out)


def holds_flattened(values: tuple[str, ...], pages: list[tuple[str, int]]) -> bool:
    """Whether an asked value holds a flattened power of one of its (PDF, page number) pages ("217", "1,018" read
    as "1018"). Only a value with three digits in a row can: the pages are read for those alone."""
    flat = [re.sub(r"(?<=\d)[,\s](?=\d)", "", v) for v in values]
    if not any(re.search(r"\d{3}", v) for v in flat):
        return False
    powers = frozenset().union(*(flattened_powers(path, page) for path, page in pages))
    return any(re.search(rf"(?<!\d){p}(?!\d)", v) for v in flat for p in powers if len(p) >= 3)
