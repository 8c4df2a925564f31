"""Java .properties files (odradek.properties): the rules of java.util.Properties, tested once
for every reader in the tree (server.properties, --command-config files, meta.properties)."""

from __future__ import annotations

import pytest

from odradek.properties import PropertiesError, format_properties, load_properties, parse_properties


def test_separators_and_comments():
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d   =   4  \n"
        "e\t:\tfive\n"
        "f==6\n"
        "g:=7\n"
        "h\n"
        "i=\n"
        "j = x # not a comment\n"
        "k\f=\f8\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4  ",
        "e": "five",
        "f": "=6",
        "g": "=7",
        "h": "",
        "i": "",
        "j": "x # not a comment",
        "k": "8",
    }


def test_continuations():
    text = (
        "listeners=PLAINTEXT://:9092,\\\n"
        "          SSL://:9093\n"
        "even=ends with two\\\\\n"
        "next=1\n"
        "# comment ending in backslash \\\n"
        "after.comment=yes\n"
        "value.with.hash=a\\\n"
        "   #b\n"
        "stops.at.blank=x\\\n"
        "\n"
        "then=2\n"
    )
    props = parse_properties(text)
    assert props["listeners"] == "PLAINTEXT://:9092,SSL://:9093"
    assert props["even"] == "ends with two\\"
    assert props["next"] == "1"
    assert props["after.comment"] == "yes"
    assert props["value.with.hash"] == "a#b"
    assert props["stops.at.blank"] == "x" and props["then"] == "2"


def test_escapes_and_line_endings():
    text = "my\\=key\\ x=v\\u0041\\tz\\q\r\nwin=1\r\nold=2\rlast=3\nlast=4"
    props = parse_properties(text)
    assert props == {"my=key x": "vA\tzq", "win": "1", "old": "2", "last": "4"}


def test_unicode_escapes_above_the_basic_plane_are_utf16_pairs():
    assert parse_properties("k=\\uD83D\\uDE00 \\u00e9") == {"k": "\U0001f600 é"}


@pytest.mark.parametrize("text", ["a=1\nb=\\u12x4\n", "a=1\nb=\\u12"])
def test_malformed_unicode_escape_names_source_and_line(text):
    with pytest.raises(PropertiesError, match=r"server.properties:2: malformed \\uxxxx"):
        parse_properties(text, "server.properties")


def test_continuation_at_end_of_file():
    assert parse_properties("a=1\\") == {"a": "1"}


def test_format_round_trips_what_java_would_escape():
    props = {
        "plain": "1",
        "key with spaces": " leading and inner space",
        "seps=:#!": "a=b:c#d!e",
        "controls": "tab\tnl\ncr\rff\fbell\x07",
        "backslash\\": "C:\\dir\\",
        "non.ascii": "zürich \U0001f600",
        "empty": "",
    }
    text = format_properties(props, comment="written by a test")
    assert text.isascii()
    lines = text.splitlines()
    assert lines[0] == "#written by a test" and lines[1].startswith("#")
    assert "non.ascii=z\\u00FCrich \\uD83D\\uDE00" in lines
    assert "key\\ with\\ spaces=\\ leading and inner space" in lines
    assert "controls=tab\\tnl\\ncr\\rff\\fbell\\u0007" in lines
    assert parse_properties(text) == props


def test_load_reads_utf8_else_latin1(tmp_path):
    utf8 = tmp_path / "u.properties"
    utf8.write_bytes("rack=zürich\n".encode())
    latin1 = tmp_path / "l.properties"
    latin1.write_bytes("rack=zürich\n".encode("latin-1"))
    assert load_properties(utf8) == load_properties(latin1) == {"rack": "zürich"}
    with pytest.raises(OSError):
        load_properties(tmp_path / "missing.properties")
