"""CSV lines checked before Spark parses them (no pyspark import).

The reader of the ``csv`` format (:func:`~.files.read_csv`) has Spark's CSV source hand it each
data line whole, as its bytes (the header dropped and blank lines skipped as Spark's ``header``
option does), checks it, then parses it with Spark's CSV parser (``from_csv``: the types and
the corrupt records are Spark's, as with its file source). A line is a bad row, before parsing,
when

- it is not UTF-8 (:data:`~.badinput.INVALID_UTF8`; its bytes kept, base64): Spark's CSV source
  would have stored U+FFFD in place of the bytes, saying nothing;
- a quoted field does not end on its line (:data:`~.badinput.UNBALANCED_QUOTE`): Spark's CSV
  source, which reads one record per line, took ``"abc`` as the value ``abc``.

:data:`BALANCED` finds the second in Spark SQL (``rlike``); :func:`quote_problem` is the same rule
in Python, which names the column where the quote opens for the message.
"""

from __future__ import annotations

QUOTE = '"'
ESCAPE = "\\"
DELIMITER = ","

_FIELD = r'(?:"(?:[^"\\]|\\.|"")*+"[^,]*+|[^,"][^,]*+|)'
BALANCED = rf"^{_FIELD}(?:,{_FIELD})*+$"
"""A Java (and Python) regular expression matching a CSV line whose quoted fields all end on it:
each field empty, unquoted (its first character not a quote; a later quote is a character of the
value) or quoted (escape ``\\`` takes the next character, a doubled quote is a quote) and followed
by anything up to the next delimiter. Possessive: linear in the line's length."""


def quote_problem(text: str) -> str | None:
    """Why the CSV line ``text`` has a quote left open (None: every quoted field ends on the
    line): :data:`BALANCED`'s rule, read as Spark's CSV parser reads a line with its defaults
    (quote ``"``, escape backslash, delimiter ``,``). O(len(text))."""
    if QUOTE not in text:
        return None
    index, end = 0, len(text)
    while index <= end:
        if index < end and text[index] == QUOTE:
            opened = index
            index += 1
            while True:
                if index >= end:
                    return (
                        f"unbalanced quote: the quoted field at column {opened + 1} does not end on "
                        "its line (a CSV record is one line)"
                    )
                char = text[index]
                if char == ESCAPE or (char == QUOTE and text[index + 1 : index + 2] == QUOTE):
                    index += 2  # an escaped character, or a doubled quote
                elif char == QUOTE:
                    index += 1
                    break
                else:
                    index += 1
        following = text.find(DELIMITER, index)
        if following < 0:
            return None
        index = following + 1
    return None
