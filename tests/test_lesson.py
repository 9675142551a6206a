"""Lessons: the Markdown a teacher writes, read and written back; the shipped tour; a handout with a page per step."""

from __future__ import annotations

import re

import pytest

from vitviz.tools import cli, lesson
from vitviz.views import records_of


def test_a_lesson_reads_and_writes_back_and_a_wrong_line_is_named():
    text = ("# Patches then attention\n\n1. [Cut into patches.](?tab=patches&patch=16)\n"
            "2. [Where [CLS] looks (a caption may hold brackets).](?tab=attention&image=cat&layer=6)\n")
    got = lesson.parse(text)
    assert got.title == "Patches then attention" and [s.query.get("tab") for s in got.steps] == ["patches",
                                                                                                  "attention"]
    assert got.steps[1].caption == "Where [CLS] looks (a caption may hold brackets)."
    assert lesson.parse(lesson.write(got)) == got
    with pytest.raises(ValueError, match="line 3 is not a step"):
        lesson.parse("# t\n1. [a](?tab=patches)\nsee https://example.org\n")
    with pytest.raises(ValueError, match="at least one step"):
        lesson.parse("# only a title\n")


def test_the_tour_has_ten_steps_each_opening_a_tab_with_settings_its_views_accept():
    tour = lesson.tour()
    assert len(tour.steps) == 10 and all(20 < len(s.caption) < 400 for s in tour.steps)
    tabs = [s.query["tab"] for s in tour.steps]
    assert tabs[0] == "forward" and {"patches", "positions", "attention", "classify", "vitcnn", "forward"} == set(tabs)
    for step in tour.steps:
        q = step.query
        for r in records_of(q["tab"]):  # every setting the link holds is one its tab's views accept
            r.view.check(r.view.from_link(q))
        known = {f.link for r in records_of(q["tab"]) for f in r.view.settings() if f.link}
        assert set(q) - {"tab", "image"} <= known, (step.link, set(q) - known)


@pytest.mark.slow
def test_the_handout_has_one_page_per_step(tmp_path):
    out = tmp_path / "handout.pdf"
    assert cli.main(["lesson", "tour", "--out", str(out)]) == 0
    pages = re.findall(rb"/Type\s*/Page[^s]", out.read_bytes())
    assert len(pages) == 10
    mine = tmp_path / "mine.md"
    mine.write_text("# Two steps\n1. [The patches.](?tab=patches&image=cat&patch=32)\n2. [The toy.](?tab=positions)\n")
    assert cli.main(["lesson", str(mine), "--out", str(tmp_path / "two.pdf")]) == 0
    assert len(re.findall(rb"/Type\s*/Page[^s]", (tmp_path / "two.pdf").read_bytes())) == 2
    assert cli.main(["lesson", str(mine), "--out", str(tmp_path / "two.txt")]) == 2  # a handout is a PDF


def test_a_lesson_that_is_not_text_is_refused_in_words(tmp_path, capsys):
    picture = tmp_path / "photo.md"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    assert cli.main(["lesson", str(picture), "--out", str(tmp_path / "h.pdf")]) == 1
    err = capsys.readouterr().err
    assert "not a text file" in err and "codec" not in err
