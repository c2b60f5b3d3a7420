"""The decision page's edit form holds the values the card shows, as the form sends them."""

from __future__ import annotations

from adapters.web.render import _field
from bot import PromptField


def test_a_choice_of_text_and_numbers_shows_its_value_selected() -> None:
    field = PromptField(
        name="mode",
        label="Mode",
        kind="choice",
        choices=("a", "b", "1"),
        json_choices=True,
        value="b",
    )
    shown = _field(field)
    assert '<option value="b" selected>' in shown
    assert '<option value="a">' in shown
    number = PromptField(
        name="mode", label="Mode", kind="choice", choices=("a", "1"), json_choices=True, value=1
    )
    assert '<option value="1" selected>' in _field(number)


def test_yes_no_and_text_keep_their_values() -> None:
    flag = PromptField(name="force", label="Force", kind="boolean", value=True)
    assert '<option value="true" selected>' in _field(flag)
    city = PromptField(name="city", label="City", value="Zürich")
    assert ">Zürich</textarea>" in _field(city)


def test_a_choice_whose_value_is_none_of_them_starts_on_the_empty_choice() -> None:
    """Sent as it is shown, an empty choice leaves the argument as it was; a first option
    pre-selected by the browser would change it unseen."""
    field = PromptField(name="mode", label="Mode", kind="choice", choices=("a", "b"), value="zzz")
    shown = _field(field)
    assert shown.index('<option value="">') < shown.index('<option value="a">')
    assert " selected" not in shown
