"""Java's ``SimpleDateFormat`` patterns (``yyyy-MM-dd'T'HH:mm:ss.SSSZ``), formatting and parsing
in UTC, for TimestampConverter's ``format`` and TimestampRouter's ``timestamp.format``.

Supported letters: y (year), M (month; MMM/MMMM names), d, H, h, m, s, S (milliseconds), a (AM/PM),
E (day name), Z / X / z (the zone: always UTC here); text in single quotes is literal, '' a quote.
Any other letter is refused with a message, so a pattern never formats silently wrong.
Immutable once built; safe from any thread.
"""

from __future__ import annotations

import datetime
import re

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
SUPPORTED = set("yMdHhmsSaEZXz")


class JavaDateFormat:
    """One compiled pattern; ``ValueError`` from the constructor names an unsupported letter."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.tokens: list[tuple[str, int] | str] = []  # (letter, count) or literal text
        i = 0
        while i < len(pattern):
            char = pattern[i]
            if char == "'":
                end = i + 1
                text = ""
                while end < len(pattern):
                    if pattern[end] == "'":
                        if end + 1 < len(pattern) and pattern[end + 1] == "'":
                            text += "'"
                            end += 2
                            continue
                        break
                    text += pattern[end]
                    end += 1
                else:
                    raise ValueError(f"Unterminated quote in date format pattern {pattern!r}")
                self.tokens.append(text if end > i + 1 else "'")
                i = end + 1
            elif char.isalpha():
                if char not in SUPPORTED:
                    raise ValueError(f"Unsupported letter {char!r} in date format pattern {pattern!r}")
                count = 1
                while i + count < len(pattern) and pattern[i + count] == char:
                    count += 1
                self.tokens.append((char, count))
                i += count
            else:
                self.tokens.append(char)
                i += 1
        self._regex = re.compile("".join(self._token_regex(t) for t in self.tokens), re.IGNORECASE)

    def format(self, moment: datetime.datetime) -> str:
        utc = moment.astimezone(datetime.UTC) if moment.tzinfo else moment
        out = []
        for token in self.tokens:
            if isinstance(token, str):
                out.append(token)
                continue
            letter, count = token
            if letter == "y":
                out.append(f"{utc.year % 100:02d}" if count == 2 else f"{utc.year:0{count}d}")
            elif letter == "M":
                if count >= 4:
                    out.append(MONTHS[utc.month - 1])
                elif count == 3:
                    out.append(MONTHS[utc.month - 1][:3])
                else:
                    out.append(f"{utc.month:0{count}d}")
            elif letter == "E":
                name = DAYS[utc.weekday()]
                out.append(name if count >= 4 else name[:3])
            elif letter == "a":
                out.append("AM" if utc.hour < 12 else "PM")
            elif letter == "Z":
                out.append("+0000")
            elif letter == "X":
                out.append("Z")
            elif letter == "z":
                out.append("UTC")
            else:
                number = {
                    "d": utc.day, "H": utc.hour, "h": (utc.hour % 12) or 12, "m": utc.minute,
                    "s": utc.second, "S": utc.microsecond // 1000,
                }[letter]
                out.append(f"{number:0{count}d}")
        return "".join(out)

    @staticmethod
    def _token_regex(token: tuple[str, int] | str) -> str:
        if isinstance(token, str):
            return re.escape(token)
        letter, count = token
        if letter == "M" and count >= 3:
            return r"(?P<Mname>[A-Za-z]+)"
        if letter == "E":
            return r"[A-Za-z]+"
        if letter == "a":
            return r"(?P<a>AM|PM)"
        if letter in "ZXz":
            return r"(?:Z|UTC|GMT|[+-]00:?00)"
        digits = rf"\d{{{count}}}" if count >= 2 else r"\d+"
        return f"(?P<{letter}>{digits})"

    def parse(self, text: str) -> datetime.datetime:
        """``text`` read with this pattern, as an aware UTC datetime; ``ValueError`` when it does not match."""
        match = self._regex.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"Could not parse {text!r} with format {self.pattern!r}")
        found = match.groupdict()
        year = int(found.get("y") or 1970)
        if found.get("y") and len(found["y"]) == 2:
            year += 2000
        if found.get("Mname"):
            names = [m[:3].lower() for m in MONTHS]
            month = names.index(found["Mname"][:3].lower()) + 1
        else:
            month = int(found.get("M") or 1)
        hour = int(found.get("H") or 0)
        if found.get("h"):
            hour = int(found["h"]) % 12 + (12 if (found.get("a") or "").upper() == "PM" else 0)
        return datetime.datetime(
            year, month, int(found.get("d") or 1), hour, int(found.get("m") or 0), int(found.get("s") or 0),
            int(found.get("S") or 0) * 1000, tzinfo=datetime.UTC,
        )
