"""`markup`: what a renderer hides is dropped, what it shows stays, and overrides read as shown."""

import pytest

from rewardlab.rewards.markup import visual_order, without_unseen_markup


@pytest.mark.parametrize(
    "hidden",
    [
        "<style>SECRET</style>",
        "<script>SECRET</script>",
        "<!-- SECRET -->",
        '<img src="x.png" alt="SECRET">',
        '<abbr title="SECRET">',
        '<span style="display:none">SECRET</span>',
        '<span style="color: transparent">SECRET</span>',
        '<span style="position:absolute;left:-9999px">SECRET</span>',
        "<div hidden><p>SECRET <i>nested</i></p></div>",
        "![SECRET](x.png)",
        '\n[ref]: https://x.y "SECRET"\n',
        "[link](https://x.y/SECRET)",
    ],
)
def test_what_a_renderer_hides_is_dropped(hidden):
    assert "SECRET" not in without_unseen_markup(f"Before {hidden} after")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("<b>bold</b> and <span style='color:red'>red</span>", "bold and red"),
        ("[the link text](https://x.y)", "[the link text]"),
        ("$a<b$ or $c>d$, and $0<x>5$", "$a<b$ or $c>d$, and $0<x>5$"),  # mathematics, not tags
        ("<style>unclosed", "<style>unclosed"),  # an unclosed element hides nothing
        ("[note](Actually it is 7)", "[note](Actually it is 7)"),  # no link: rendered as written
    ],
)
def test_what_a_renderer_shows_stays(text, shown):
    assert without_unseen_markup(text) == shown


def test_a_right_to_left_override_is_read_as_shown():
    assert visual_order("The answer is \u202e01\u202c.") == "The answer is 10."
    assert visual_order("a\u202ecba\nnext") == "aabc\nnext"  # an override ends at the line
    assert visual_order("x\u2066y\u2069z") == "xyz"
