"""Lessons: the Markdown a teacher writes, read and written back; the shipped tour; a handout with a page per step."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from vitviz.tools import cli, lesson
from vitviz.specs.tabs import TABS
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
        assert set(q) - {"tab", "image", "open", "show"} <= known, (step.link, set(q) - known)
        if "open" in q:  # a section of the step's tab: one of its views (an accordion) or the forward pass's parts
            assert q["open"] in {r.name for r in records_of(q["tab"])} | {"residual", "lens"}, q["open"]
        if "show" in q:  # a figure its tab declares
            assert q["show"] in dict(TABS[q["tab"]].figures), q["show"]
    # one picture through the whole tour, and no two steps the same view
    assert {s.query.get("image") for s in tour.steps if "image" in s.query} == {"scene_star"}
    assert len({s.link for s in tour.steps}) == len(tour.steps)
    opened = {k + 1: s.query.get("open") for k, s in enumerate(tour.steps)}
    assert (opened[3], opened[5], opened[7], opened[8]) == ("patch_filters", "residual", "inside_head", "lens")
    assert tour.steps[8].query.get("show") == "top5"  # the step on probabilities brings up the top 5, not the maps


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


def test_a_lesson_too_large_is_refused_in_words_before_it_is_read(tmp_path, capsys):
    """3,000 steps or a 20 MB caption once ran for minutes: a lesson is bounded (size, steps, caption) and said so."""
    many = "# Many\n" + "".join(f"{i}. [Step {i}.](?tab=patches&patch=16)\n" for i in range(1, 3001))
    with pytest.raises(ValueError, match="at most 32 KiB"):
        lesson.parse(many)
    with pytest.raises(ValueError, match="at most 40 steps"):
        lesson.parse("# Forty-one\n" + "".join(f"{i}. [S.](?tab=patches)\n" for i in range(1, 42)))
    with pytest.raises(ValueError, match="caption holds at most 600"):
        lesson.parse("# Long\n1. [" + "a" * 601 + "](?tab=patches)\n")
    huge = tmp_path / "huge.md"
    huge.write_bytes(b"# Huge\n1. [" + b"a" * (20 * 2**20) + b"](?tab=patches)\n")
    assert cli.main(["lesson", str(huge), "--out", str(tmp_path / "h.pdf")]) == 1
    assert "at most 32 KiB" in capsys.readouterr().err and not (tmp_path / "h.pdf").exists()


def test_a_handout_that_cannot_be_written_leaves_nothing_and_no_traceback(tmp_path, capsys):
    mine = tmp_path / "mine.md"
    mine.write_text("# Two\n1. [The patches.](?tab=patches&image=cat)\n2. [An upload.](?tab=patches&image=upload-ab12)\n")
    out = tmp_path / "handout.pdf"
    assert cli.main(["lesson", str(mine), "--out", str(out)]) == 1  # step 2 cannot be printed
    assert "needs one of the example pictures" in capsys.readouterr().err
    assert list(tmp_path.glob("*.pdf")) == [] and list(tmp_path.glob(".*")) == []  # no partial handout left
    one = tmp_path / "one.md"
    one.write_text("# One\n1. [The patches.](?tab=patches&image=cat)\n")
    assert cli.main(["lesson", str(one), "--out", "/proc/x.pdf"]) == 1
    err = capsys.readouterr().err
    assert "cannot write the handout there" in err and "Traceback" not in err


def test_settings_a_step_asks_for_but_cannot_have_are_said_with_their_range(tmp_path, capsys):
    mine = tmp_path / "mine.md"
    mine.write_text("# Odd\n1. [Deep.](?tab=attention&image=scene_star&model=vitviz+tiny+%28shapes+only%29"
                    "&layer=999999&keep=nan)\n2. [Fine.](?tab=patches&image=cat&patch=16)\n")
    out = tmp_path / "odd.pdf"
    assert cli.main(["lesson", str(mine), "--out", str(out)]) == cli.PARTLY  # done, with settings not as asked
    err = capsys.readouterr().err
    assert re.search(r"step 1: .*layer.*1.*12", err), err  # the parameter and its range
    assert re.search(r"step 1: .*keep", err) and "step 2" not in err
    assert out.is_file()


def test_a_lesson_link_over_the_bound_is_refused_in_words_by_the_bar():
    from vitviz.app import lessons as page_lessons

    made = page_lessons.encode(lesson.parse("# Short\n1. [A step.](?tab=patches)\n"))
    assert "step 1 of 1" in page_lessons.bar({"lesson": made})
    said = page_lessons.bar({"lesson": "md:" + "a" * (lesson.MAX_LINK + 1)})
    assert "a lesson link holds at most 8,000" in said and "step 1" not in said


def test_the_shipped_lessons_open_by_name_and_each_step_names_sections_and_settings_its_tab_has():
    from vitviz.app import lessons as page_lessons
    from vitviz.views import records_of

    assert lesson.shipped_names() == ["test_the_map", "tour"]
    mine = lesson.shipped("test_the_map")
    assert mine.title == "Can we trust the map?" and len(mine.steps) == 5
    assert lesson.shipped("../tour") is None and lesson.shipped("nothing") is None
    assert "step 2 of 5" in page_lessons.bar({"lesson": "test_the_map", "step": "2"})
    for step in mine.steps:
        q = step.query
        records = records_of(q["tab"])
        known = {f.link for r in records for f in r.view.settings() if f.link}
        assert set(q) - {"tab", "image", "open"} <= known, step.link
        assert q.get("open", records[0].name) in {r.name for r in records}, step.link
    assert {s.query.get("open") for s in mine.steps} == {None, "predict", "deletion", "report", "randomise"}
    name, _, _, _ = lesson.step_view(mine.steps[2])
    assert name == "deletion"  # the handout prints the section the step opens


@pytest.mark.slow
def test_the_test_the_map_handout_prints_each_steps_section(tmp_path, capsys):
    out = tmp_path / "map.pdf"
    assert cli.main(["lesson", "test_the_map", "--out", str(out)]) == cli.PARTLY  # step 2 is filled in on screen
    assert "filled in on screen" in capsys.readouterr().err
    assert len(re.findall(rb"/Type\s*/Page[^s]", out.read_bytes())) == 5


# ---- a lesson's own picture, and its handout's links -------------------------------------------------------------

def _photo(side: int = 96) -> bytes:
    import io

    import numpy as np
    from PIL import Image

    y, x = np.mgrid[:side, :side]
    rgb = np.stack([x * 255 // side, y * 255 // side, (x + y) % 256], -1).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, "JPEG", quality=90)
    return out.getvalue()


def _png(rgb) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(rgb).save(out, "PNG")
    return out.getvalue()


def test_a_lesson_carries_its_own_picture_in_its_file_and_its_steps_show_it(tmp_path):
    import numpy as np

    from vitviz.core import images

    photo = _photo()
    made = lesson.Lesson("My photo", (lesson.Step("Its patches.", "?tab=patches&image=lesson&patch=16"),
                                      lesson.Step("An example.", "?tab=patches&image=cat")), photo)
    text = lesson.write(made)
    assert text.count("data:image/jpeg;base64,") == 1 and lesson.parse(text) == made  # the picture travels whole
    name, values, rgb, notes = lesson.step_view(made.steps[0], made)
    assert name == "patches" and values["patch"] == 16 and notes == []
    assert np.array_equal(rgb, images.load_rgb(photo, images.INTAKE_SHORT_SIDE))  # the lesson's picture, decoded
    assert not np.array_equal(lesson.step_view(made.steps[1], made)[2], rgb)  # an example step keeps its example
    with pytest.raises(ValueError, match="carries none"):  # a step that asks for a picture the lesson lacks
        lesson.step_view(made.steps[0], lesson.Lesson("no picture", made.steps))
    line = text.splitlines()[2]
    with pytest.raises(ValueError, match="line 4: a lesson carries one picture"):
        lesson.parse(text.replace(line, line + "\n" + line))
    big = "![p](data:image/png;base64," + "A" * (lesson.MAX_PICTURE_BYTES * 4 // 3 + 8) + ")"
    with pytest.raises(ValueError, match="over 4 MiB"):
        lesson.parse("# Big\n" + big + "\n1. [s](?tab=patches)\n")
    # the text's bound is the text's: a picture larger than it does not count against it
    noisy = np.random.default_rng(0).integers(0, 256, (300, 300, 3), dtype=np.uint8)
    heavy = dataclasses.replace(made, picture=_png(noisy))
    assert len(lesson.write(heavy)) > 3 * lesson.MAX_BYTES and lesson.parse(lesson.write(heavy)) == heavy


def test_a_handouts_links_are_absolute_and_their_qr_codes_read_back_as_the_link():
    import zxingcpp

    tour = lesson.tour()
    a = lesson.absolute_link("http://192.168.1.20:7860/vitviz?x=1#top", "tour", 8, tour.steps[7])
    assert a == "http://192.168.1.20:7860/vitviz/" + tour.steps[7].link + "&lesson=tour&step=8"
    assert lesson.absolute_link("https://h.org/", None, 2, tour.steps[1]) == "https://h.org/" + tour.steps[1].link
    code = lesson.qr_matrix(a)
    assert code.shape[0] == code.shape[1] and not code[:4].any() and not code[:, -4:].any()  # the quiet zone
    pixels = np.kron(np.where(code, 0, 255).astype(np.uint8), np.ones((6, 6), np.uint8))
    read = zxingcpp.read_barcodes(pixels)
    assert [r.text for r in read] == [a]


@pytest.mark.slow
def test_a_lesson_with_its_own_picture_prints_each_steps_section_with_a_qr_code_that_reads_back(tmp_path, capsys):
    import zxingcpp

    from vitviz.tools import bundle

    mine = tmp_path / "mine.md"
    made = lesson.Lesson("A rather long title for a lesson a teacher made about one photo of her own garden",
                         (lesson.Step("The photo's patches.", "?tab=patches&image=lesson&patch=16"),
                          lesson.Step("How the answer forms.", "?tab=forward&image=lesson&fp_model=vitviz+tiny+%28"
                                      "shapes+only%29&fp_layer=3&open=lens")), _photo(160))
    mine.write_text(lesson.write(made))
    out = tmp_path / "mine.pdf"
    assert cli.main(["lesson", str(mine), "--out", str(out), "--base-url", "http://10.0.0.5:7860/"]) == 0
    assert len(re.findall(rb"/Type\s*/Page[^s]", out.read_bytes())) == 2
    assert cli.main(["lesson", str(mine), "--out", str(out), "--base-url", "not a url"]) == cli.USAGE
    assert "--base-url" in capsys.readouterr().err
    # the lens step prints the lens (its section), not the residual stream the forward pass opens with
    name, values, rgb, _ = lesson.step_view(made.steps[1], made)
    shown = bundle.make(name, values, rgb)
    assert lesson.step_figures(name, made.steps[1], shown) == [shown.figures["lens"], shown.figures["lens_map"]]
    fig, notes = lesson.page(made, 2, "http://10.0.0.5:7860/")
    fig.set_dpi(150)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[..., :3].mean(-1).astype(np.uint8)
    assert [r.text for r in zxingcpp.read_barcodes(pixels)] == ["http://10.0.0.5:7860/" + made.steps[1].link]
    # the title wraps within the page: no text drawn past its right edge
    right = max(t.get_window_extent(canvas.get_renderer()).x1 for t in fig.texts)
    assert right <= fig.bbox.width, (right, fig.bbox.width)


def test_the_page_prints_a_handout_through_its_server_function_and_refuses_in_words(tmp_path):
    from vitviz.app import lessons as page_lessons

    text = "# From the page\n1. [The patches.](?tab=patches&image=cat&patch=32)\n"
    def handout_of(markdown: str, base: str) -> dict:
        return page_lessons.handout_of({"markdown": markdown, "base_url": base})

    got = handout_of(text, "http://10.0.0.5:7860/")
    assert set(got) == {"path", "name", "notes"} and got["name"] == "from-the-page.pdf" and got["notes"] == []
    pdf = Path(got["path"])
    try:
        assert pdf.read_bytes().startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes())) == 1
    finally:
        pdf.unlink(missing_ok=True)
    assert "no longer holds" in handout_of(text.replace("image=cat", "image=upload-0123456789ab"), "http://h/")["error"]
    two = text + "2. [b](?tab=patches&image=upload-aa)\n3. [c](?tab=patches&image=upload-bb)\n"
    assert "one picture of its own" in handout_of(two, "http://h/")["error"]
    assert "address" in handout_of(text, "javascript:alert(1)")["error"]
    assert "line 2 is not a step" in handout_of("# t\nnot a step\n", "http://h/")["error"]
    assert "at most 32 KiB" in page_lessons.handout_of("just a string")["error"]


def test_a_lesson_picture_is_kept_under_the_kind_its_bytes_say_not_the_words_of_its_url():
    import base64

    from vitviz.app import uploads

    png = _png(np.full((40, 40, 3), 200, np.uint8))
    name = uploads.keep_lesson_picture("data:image/../../evil;base64," + base64.b64encode(png).decode())
    path = Path(uploads.named_file(name))
    try:
        assert name.startswith("upload-") and path.suffix == ".png" and path.read_bytes() == png
        assert uploads.lesson_picture(name) == lesson.data_url(png)  # handed back whole, as the file carried it
        assert ".." not in str(path) and not (path.parent.parent / "evil").exists()
    finally:
        path.unlink(missing_ok=True)
    with pytest.raises(ValueError, match="data: URL"):
        uploads.keep_lesson_picture("https://example.org/a.png")


def test_a_step_that_names_the_top_5_prints_its_probabilities_on_its_handout_page():
    tour = lesson.tour()
    fig, _ = lesson.page(tour, 9)
    bars = [ax for ax in fig.axes if ax.get_title().startswith("top 5")]
    assert len(bars) == 1
    widths = [p.get_width() for p in bars[0].patches]
    names = [t.get_text() for t in bars[0].get_yticklabels()]
    assert len(widths) == 5 and widths == sorted(widths, reverse=True) and abs(sum(widths) - 1) < 0.2
    assert names[0] == "star"  # the tour's picture, read by the offline model
    fig8, _ = lesson.page(tour, 8)  # a step that names no such figure prints none
    assert not [ax for ax in fig8.axes if ax.get_title().startswith("top 5")]


def _marked_step(marks: int = 232) -> lesson.Step:
    """A predict step whose link marks ``marks`` patches of a 28 × 28 grid (DINO ViT-S/8 at 224 px), as a student's
    page writes it: about 2,400 characters with the page's address (the issue's was 4,178; any over 2,331 fails)."""
    from urllib.parse import urlencode

    cells = ";".join(f"{r},{c}" for r in range(10, 28) for c in range(10, 28)).split(";")[:marks]
    return lesson.Step("Predict first: mark the patches the model needs.", "?tab=classify&image=scene_star&" + urlencode(
        {"tm_model": "vitviz tiny (shapes only)", "open": "predict", "tm_patches": ";".join(cells)}, safe=""))


def test_the_segno_internals_the_qr_bound_reads_are_there_with_the_numbers_of_the_qr_standard():
    """lesson.qr_bits reads segno's encoder and capacity table (segno has no public way to ask whether a text fits
    short of making the code: a full make of a fitting 2,300-character link takes about 0.2 s, and each step's code
    would be made twice). An upgrade of segno that moves or changes them fails here, loudly, with what was expected:
    the bits of a text in its mode with the mode's indicator and count (ISO/IEC 18004: 4 + 16 + 8 per byte, 4 + 14 +
    10 per three digits, 4 + 13 + 11 per two of its upper-case alphabet, at version 40) and the data bits of
    versions 1 and 40 at error correction M (16 and 2,334 codewords)."""
    from segno import consts, encoder

    level = encoder.normalize_errorlevel(lesson.QR_ERROR)
    assert isinstance(consts.SYMBOL_CAPACITY, dict)
    assert consts.SYMBOL_CAPACITY[lesson.QR_VERSION][level] == 2334 * 8
    assert consts.SYMBOL_CAPACITY[1][level] == 16 * 8
    for text, bits in (("a" * 10, 4 + 16 + 80), ("777", 4 + 14 + 10), ("AB", 4 + 13 + 11)):
        assert encoder.prepare_data(text, None, None).bit_length_with_overhead(lesson.QR_VERSION, False) == bits
    assert lesson.qr_bits("a" * 10) == (100, 18672)


def test_a_qr_codes_bound_is_segnos_own_capacity_checked_before_a_code_is_made():
    """issue 68 item 14: a step's link longer than a QR code holds failed the whole handout with segno's "Data too
    large". The bound is segno's (its mode for the text, its capacity table at error correction M), checked up
    front: it agrees with segno.make on both sides of the limit, for bytes, digits and QR's upper-case alphabet."""
    import segno

    assert lesson.qr_chars() == 2331  # version 40-M in byte mode, ISO/IEC 18004 table 7
    for one, most in (("a", lesson.qr_chars()), ("7", 5596), ("A", 3391)):
        for n, fits in ((most, True), (most + 1, False)):
            assert lesson.qr_fits(one * n) is fits, (one, n)
            try:
                segno.make(one * n, error=lesson.QR_ERROR, micro=False)
                made = True
            except segno.DataOverflowError:
                made = False
            assert made is fits, (one, n)
    with pytest.raises(ValueError, match=r"2,332 characters are more than a QR code holds \(2,331 at error "
                                         r"correction M\)") as err:
        lesson.qr_matrix("a" * 2332)
    assert not isinstance(err.value, segno.DataOverflowError)
    step = _marked_step()
    address, coded, why = lesson.qr_link("http://192.168.1.20:7860/", None, 2, step)
    assert address == "http://192.168.1.20:7860/" + step.link and len(address) > lesson.qr_chars()
    assert coded is None and f"its link is {len(address):,} characters" in why and "mark fewer patches" in why
    assert "hand out the lesson's file" in why
    # a lesson a link can name: its QR code holds the short link that opens the step
    address, coded, why = lesson.qr_link("http://192.168.1.20:7860/x?y#z", "test_the_map", 2, step)
    assert coded == "http://192.168.1.20:7860/x/?lesson=test_the_map&step=2" and "short link" in why
    # a link that fits is coded whole, with nothing to say
    short = lesson.tour().steps[0]
    assert lesson.qr_link("http://h/", None, 1, short) == ("http://h/" + short.link, "http://h/" + short.link, None)


@pytest.mark.slow
def test_a_step_whose_link_no_qr_code_holds_prints_without_one_and_the_cli_and_the_page_say_which_and_why(
        tmp_path, capsys):
    """issue 68 item 14 through ``vitviz lesson`` and the page's handout function: the handout is printed, the
    marked step's page has no QR code and says why; every other page keeps its code."""
    import zxingcpp
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from vitviz.app import lessons as page_lessons

    made = lesson.Lesson("Predict, then test", (lesson.Step("The patches.", "?tab=patches&image=cat&patch=32"),
                                                _marked_step()))
    mine = tmp_path / "mine.md"
    mine.write_text(lesson.write(made))
    out = tmp_path / "mine.pdf"
    code = cli.main(["lesson", str(mine), "--out", str(out), "--base-url", "http://10.0.0.5:7860/"])
    err = capsys.readouterr().err
    assert code in (cli.DONE, cli.PARTLY) and out.read_bytes().startswith(b"%PDF"), err
    assert "Data too large" not in err and re.search(r"step 2: its link is 2,4\d\d characters, more than a QR code "
                                                     r"holds \(2,331 at error correction M\)", err), err
    read = []
    for i in (1, 2):
        fig, _ = lesson.page(made, i, "http://10.0.0.5:7860/")
        fig.set_dpi(150)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        pixels = np.asarray(canvas.buffer_rgba())[..., :3].mean(-1).astype(np.uint8)
        read.append([r.text for r in zxingcpp.read_barcodes(pixels)])
        if i == 2:
            assert any(t.get_text().startswith("No QR code: its link is") for t in fig.texts)
    assert read == [["http://10.0.0.5:7860/" + made.steps[0].link], []]
    got = page_lessons.handout_of({"markdown": lesson.write(made), "base_url": "http://10.0.0.5:7860/"})
    try:
        assert "error" not in got, got
        assert any(n.startswith("step 2: its link is") and "mark fewer patches" in n for n in got["notes"])
    finally:
        Path(got.get("path", tmp_path / "none")).unlink(missing_ok=True)


@pytest.mark.parametrize("text, said", [
    ("# Cut\n![p](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAE)\n1. [a](?tab=patches)\n",
     "line 2: the lesson's picture is damaged or cut short (its base64 text does not decode)"),
    ("# Drawn\n\n![p](data:image/svg+xml;base64,PHN2Zz4=)\n1. [a](?tab=patches)\n",
     "line 3: the lesson's picture is image/svg+xml; a lesson carries a PNG, JPEG, WebP or GIF picture"),
    ("# Linked\n![p](https://example.org/cat.png)\n1. [a](?tab=patches)\n",
     "line 2: a lesson's picture travels inside its file, as a data: URL"),
    ("# Prank\n1. [Click](javascript:alert(1))\n", "line 2: a step's link is a vitviz link's query, starting with '?'"),
    ("# Space\n1. [a](?tab=patches&image=my cat)\n", "line 2: a step's link holds a space or a ')'"),
])
def test_a_lesson_line_that_is_wrong_is_refused_in_vitvizs_words_naming_the_line_and_what_to_do(text, said, tmp_path,
                                                                                               capsys):
    """issue 68 item 16: a bad base64 picture line said binascii's "Incorrect padding"; an SVG picture line (and a
    javascript: link) "line 3 is not a step". Each now says what is wrong with it, on which line, and what to do;
    so does ``vitviz lesson``."""
    with pytest.raises(ValueError) as err:
        lesson.parse(text)
    assert str(err.value).startswith(said) and "padding" not in str(err.value).lower()
    path = tmp_path / "bad.md"
    path.write_text(text)
    assert cli.main(["lesson", str(path), "--out", str(tmp_path / "x.pdf")]) != cli.DONE
    assert said in capsys.readouterr().err and not (tmp_path / "x.pdf").exists()


def test_base64_that_decodes_is_whole_groups_of_four_as_the_pages_reader_says():
    import base64
    import binascii

    for body, ok in [("", True), ("QQ==", True), ("QUI=", True), ("QUJD", True), ("QQ", False), ("QQ=", False),
                     ("Q===", False), ("QU=I", False), ("QUJD\n", False)]:
        assert lesson.decodes(body) is ok, body
        try:
            base64.b64decode(body, validate=True)
            decoded = True
        except binascii.Error:
            decoded = False
        assert decoded is ok, body
    assert lesson.parse("\ufeff# Notepad's\n1. [a](?tab=patches)\n").title == "Notepad's"  # its byte order mark
