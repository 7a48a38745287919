"""Text one person writes and another reads (a payer's name, a description, a merchant's name):
what would hide or fake what it shows.

Unicode format characters (category Cf: zero-width spaces and joiners, direction marks,
embeddings, overrides and isolates, the byte order mark, the soft hyphen, tag characters) draw
nothing or reorder what is drawn around them: "\u202eabc" shows as "cba". Text made only of
spaces, combining marks and the letters that draw nothing (the Hangul fillers, the braille
blank) shows as nothing at all.
"""

from __future__ import annotations

import unicodedata

# Letters (and one symbol) that draw nothing: pasted as a name, the name shows blank.
FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")

FORMAT_CHARACTERS = (
    "must not hold invisible formatting characters (a zero-width space, a direction mark or "
    "override, a soft hyphen, ...)"
)
BLANK = "must have a character one can see (spaces and combining marks alone show nothing)"


def has_format_characters(text: str) -> bool:
    """Whether `text` holds a character of Unicode category Cf."""
    return any(unicodedata.category(c) == "Cf" for c in text)


def shows_nothing(text: str) -> bool:
    """Whether `text` is blank once format characters and combining marks are set aside."""
    return all(
        c.isspace() or c in FILLERS or unicodedata.category(c) in ("Cf", "Mn", "Mc", "Me")
        for c in text
    )
