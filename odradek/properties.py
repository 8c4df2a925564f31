"""Java ``.properties`` files, the one reader and writer of the tree.

Kafka keeps its settings in this format: ``server.properties``, the client files of the
command-line tools (``--command-config``) and each log dir's ``meta.properties``. The rules are
``java.util.Properties``':

* lines end at ``\\n``, ``\\r`` or ``\\r\\n``; leading white space (space, tab, form feed) is
  dropped; a line whose first other character is ``#`` or ``!`` is a comment;
* the key ends at the first unescaped ``=``, ``:`` or white space; white space around one
  ``=`` or ``:`` separator is skipped; the rest of the line is the value (trailing white space
  kept); a line with only a key has the value ``""``;
* a line ending in an odd number of backslashes continues on the next one, whose leading white
  space is dropped (a comment line never continues);
* ``\\t \\n \\r \\f`` and ``\\uXXXX`` are escapes in keys and values, a backslash before any other
  character stands for that character; a malformed ``\\u`` escape is an error;
* the last occurrence of a key wins.

``format_properties`` writes what ``Properties.store`` writes: non-ASCII and control
characters as ``\\uXXXX`` (UTF-16 surrogate pairs above U+FFFF), separators and comment marks
escaped, so that Java and this module read the text back unchanged.

Stateless functions; safe from any thread.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["PropertiesError", "format_properties", "load_properties", "parse_properties"]

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WRITE_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


class PropertiesError(ValueError):
    """Text that is not a valid properties file; the message starts with ``source:line``."""


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """The key/value pairs of properties ``text``; ``source`` names it in errors."""
    lines = re.split(r"\r\n|\r|\n", text)
    props: dict[str, str] = {}
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i >= len(lines):
                break
            line += lines[i].lstrip(_WHITESPACE)
            i += 1
        key, value = _split_key_value(line)
        props[_unescape(key, source, lineno)] = _unescape(value, source, lineno)
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a properties file: UTF-8, else Latin-1 (Java's encoding for it). Raises OSError
    when the file cannot be read, PropertiesError when it is malformed."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, str(path))


def format_properties(props: Mapping[str, object], comment: str | None = None) -> str:
    """Properties text in ``Properties.store``'s form: an optional ``#comment`` line, a
    ``#date`` line, then ``key=value`` lines. Pure ASCII: encode it as Latin-1 or UTF-8."""
    lines = []
    if comment is not None:
        lines.append(f"#{comment}")
    lines.append("#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime()))
    for key, value in props.items():
        lines.append(f"{_escape(key, key=True)}={_escape(str(value), key=False)}")
    return "\n".join(lines) + "\n"


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    n = len(line)
    pos = 0
    escaped = False
    separator = False
    while pos < n:
        c = line[pos]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in "=:":
            separator = True
            break
        elif c in _WHITESPACE:
            break
        pos += 1
    key = line[:pos]
    pos += 1
    while pos < n:
        c = line[pos]
        if c in _WHITESPACE:
            pos += 1
        elif not separator and c in "=:":
            separator = True
            pos += 1
        else:
            break
    return key, line[pos:]


def _unescape(text: str, source: str, lineno: int) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    n = len(text)
    surrogates = False
    while i < n:
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:
            break
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not _HEX.issuperset(digits):
                raise PropertiesError(f"{source}:{lineno}: malformed \\uxxxx escape")
            code = int(digits, 16)
            surrogates = surrogates or 0xD800 <= code <= 0xDFFF
            out.append(chr(code))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    result = "".join(out)
    if surrogates:
        # Java strings are UTF-16: a character above U+FFFF is written as two escapes.
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return result


def _escape(text: str, *, key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c in _WRITE_ESCAPES:
            out.append(_WRITE_ESCAPES[c])
        elif c == " ":
            out.append("\\ " if key or i == 0 else " ")
        elif c in "=:#!":
            out.append("\\" + c)
        elif c < " " or c > "~":
            for unit in _utf16_units(c):
                out.append(f"\\u{unit:04X}")
        else:
            out.append(c)
    return "".join(out)


def _utf16_units(c: str) -> tuple[int, ...]:
    code = ord(c)
    if code <= 0xFFFF:
        return (code,)
    code -= 0x10000
    return (0xD800 | (code >> 10), 0xDC00 | (code & 0x3FF))
