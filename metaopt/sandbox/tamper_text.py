"""Text normalisation for matching what a file or a harness says, however it is spelled.

`views(text)` returns the text in the forms a matcher should see: lower-cased with shell quoting
and string concatenation taken out ('/te''sts', "/te" + "sts", $'\\x2ftests'), path separators
collapsed (//tests, /./tests, \\tests), and every base64, hex or \\x / \\NNN escape run decoded
(once more inside what was decoded; zlib, gzip, bz2 and xz streams inflated). `find(patterns, text)` is the first signature that matches
any view. Used by the tamper scan (files the agent wrote) and the diff guard (harness edits).
"""

from __future__ import annotations

import base64
import binascii
import re

_B64 = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){4,}")
_ESC1 = re.compile(r"\\x[0-9a-fA-F]{2}|\\u00[0-9a-fA-F]{2}|\\[0-7]{3}")
_JOIN = re.compile(r"""["']\s*(?:\+|\.|,|\s)\s*["']|["']{2}|\$'|\\\n""")
MAX_VIEW = 4 << 20  # characters: longer texts are matched on their first 4 MiB


def views(text: str) -> list[str]:
    """Normalised forms of `text` (see the module docstring), each lower-cased."""
    text = text[:MAX_VIEW]
    joined = _JOIN.sub("", _unescape(text))
    norm = _seps(joined.lower())
    out = [text.lower(), norm, re.sub(r"[\s\"'`+]", "", norm)]  # "/" "tests" across lines and spaces
    decoded = _decoded(joined)
    if decoded:
        out.append(_seps(decoded.lower()))
        inner = _decoded(decoded)
        if inner:
            out.append(_seps(inner.lower()))
    return out


def find(patterns: list[tuple[str, re.Pattern[str]]], text: str) -> tuple[str, str] | None:
    """(signature name, matched snippet) of the first pattern found in any view of `text`."""
    for view in views(text):
        for name, pat in patterns:
            m = pat.search(view)
            if m:
                return name, view[max(0, m.start() - 40): m.end() + 40].replace("\n", " ")
    return None


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        x = m.group(0)
        # a backslash escape (\x41, \u0041, \101), not a 0x literal: int(x, 0) cannot read it
        code = int(x[2:], 16) if x[1] in "xu" else int(x[1:], 8)  # noqa: FURB166
        return chr(code) if code < 128 else x
    return _ESC1.sub(one, text)


def _seps(text: str) -> str:
    text = text.replace("\\", "/")
    while True:
        new = re.sub(r"/\.(?=/)", "", re.sub(r"/{2,}", "/", text))
        if new == text:
            return text
        text = new


def _decoded(text: str) -> str:
    """Base64 and hex runs of `text`, decoded (only runs that decode to printable text)."""
    parts: list[str] = []
    for m in _HEX.finditer(text):
        raw = _inflate(binascii.unhexlify(m.group(0)))
        if _printable(raw):
            parts.append(raw.decode("ascii", "replace"))
    for m in _B64.finditer(text):
        s = m.group(0)
        for alt in (s, s.replace("-", "+").replace("_", "/")):
            try:
                raw = _inflate(base64.b64decode(alt + "=" * (-len(alt) % 4), validate=True))
            except (binascii.Error, ValueError):
                continue
            if _printable(raw):
                parts.append(raw.decode("ascii", "replace"))
                break
    return "\n".join(parts)


def _inflate(raw: bytes) -> bytes:
    """`raw` decompressed when it is a zlib, gzip, bz2 or xz stream (at most MAX_VIEW bytes out),
    else as it is: `exec(zlib.decompress(base64.b64decode(...)))` hides no signature."""
    import bz2
    import lzma
    import zlib

    if raw[:1] == b"\x78" and len(raw) > 2 and (raw[0] << 8 | raw[1]) % 31 == 0:
        d = zlib.decompressobj()
    elif raw[:2] == b"\x1f\x8b":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif raw[:3] == b"BZh":
        d = bz2.BZ2Decompressor()
    elif raw[:6] == b"\xfd7zXZ\x00":
        d = lzma.LZMADecompressor()
    else:
        return raw
    try:
        return d.decompress(raw, MAX_VIEW)
    except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError):
        return raw


def _printable(raw: bytes) -> bool:
    return len(raw) >= 4 and sum(32 <= b < 127 or b in (9, 10, 13) for b in raw) >= 0.95 * len(raw)
