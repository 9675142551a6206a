"""A notice takes one line on the screen, its reasons one click away (issue 43): ``components.folded``."""

from __future__ import annotations

import re

from vitviz.app.components import ONE_LINE, folded


def _summary(text: str) -> str:
    return re.search(r"<summary>(.*?) <span", text).group(1)


def test_a_short_notice_stays_as_it_is():
    assert folded("  Shown at 64 px only.  ") == "Shown at 64 px only."
    assert folded("") == ""


def test_a_long_notice_is_its_bold_lead_with_the_whole_text_one_click_away():
    note = ("**Offline here: DINO ViT-S/8 cannot be had** (no connection to the model hub, and its weights are not "
            "in this computer's cache), so the page shows **vitviz tiny (shapes only)**. Its numbers are real.")
    out = folded(note)
    assert out.startswith('<details class="vx-why"><summary>') and out.rstrip().endswith("</details>")
    assert _summary(out) == "Offline here: DINO ViT-S/8 cannot be had"
    assert note in out  # nothing of it lost: the whole text is the details' body


def test_without_a_bold_lead_the_first_sentence_is_the_headline_cut_to_one_line():
    first = "The layer asked for is past this model's depth, so its last layer is shown."
    out = folded(first + " " + "It has 4 layers; the link asked for 12. " * 3)
    assert _summary(out) == first
    long = "word " * 60 + "end."
    headline = _summary(folded(long))
    assert headline.endswith("…") and len(headline) <= ONE_LINE + 1
    assert _summary(folded("A <b>tag</b> & more. " + "x " * 80)) == "A &lt;b&gt;tag&lt;/b&gt; &amp; more."
