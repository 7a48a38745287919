"""What hides or fakes text: format characters, and text that shows nothing."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.core.plain_text import FILLERS, has_format_characters, shows_nothing

# Letters of any script (and the marks that accent them), as people's names are written.
letters = st.characters(categories=["Lu", "Ll", "Lt", "Lo"]).filter(lambda c: c not in FILLERS)
marks = st.characters(categories=["Mn"])
words = st.lists(
    st.tuples(letters, st.lists(marks, max_size=2)).map(lambda t: t[0] + "".join(t[1])),
    min_size=1,
    max_size=8,
).map("".join)
names = st.lists(words, min_size=1, max_size=4).map(" ".join)


@given(names)
def test_names_in_any_script_show_something_and_hide_nothing(name: str) -> None:
    for form in (name, unicodedata.normalize("NFC", name), unicodedata.normalize("NFD", name)):
        assert not has_format_characters(form) and not shows_nothing(form)


@pytest.mark.parametrize("name", ["João Ávila", "Zoë", "李小龍", "Nguyễn Thị Minh Khai", "محمد"])
def test_ordinary_names_are_kept(name: str) -> None:
    assert not has_format_characters(name) and not shows_nothing(name)


@given(
    st.text(st.characters(categories=["Cf", "Mn", "Me", "Zs"]) | st.sampled_from(sorted(FILLERS)))
)
def test_spaces_marks_fillers_and_format_characters_alone_show_nothing(text: str) -> None:
    assert shows_nothing(text)


@pytest.mark.parametrize("character", ["\u200b", "\u202e", "\u2066", "\ufeff", "\u00ad"])
def test_format_characters_are_found(character: str) -> None:
    assert has_format_characters(f"Maria{character}")
