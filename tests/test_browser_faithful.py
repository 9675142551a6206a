"""Test the map in Chromium: the deletion panel opens computed; predict, then test: marks made on the picker (click,
drag, keyboard) are tested, the link holds them, and the link opens with them marked and tested."""

from __future__ import annotations

import pytest
from browser_support import ON_FIRST_SCREEN, idle, open_tab, sync_api

pytestmark = pytest.mark.browser


def test_the_deletion_panel_opens_computed_with_its_table(browser, app_url):
    ctx, page = open_tab(browser, app_url, "classify", query="image=scene_star")
    try:
        page.get_by_text("Test the map: deletion and insertion").click()
        page.wait_for_selector("#deletion-curves img", state="attached", timeout=120_000)
        idle(page)
        text = page.inner_text("body")
        assert "deletion area (lower: more faithful)" in text and "random (3 orders)" in text
        alt = page.locator("#deletion-curves img").get_attribute("alt")
        assert alt and "Deletion curves" in alt and "occlusion" in alt
    finally:
        ctx.close()


def test_predict_then_test_from_marks_to_a_rank_and_back_from_the_link(browser, app_url):
    ctx, page = open_tab(browser, app_url, "classify", query="image=scene_star")
    try:
        page.get_by_text("Predict, then test", exact=True).click()
        canvas = page.locator("#predict-picker canvas")
        canvas.wait_for(timeout=60_000)
        idle(page)
        assert page.locator("#predict-choice img").count() == 0 or not page.locator("#predict-choice img").is_visible()
        box = canvas.bounding_box()
        cell = box["width"] / 8  # the offline model's 8×8 grid
        canvas.click(position={"x": 3.5 * cell, "y": 3.5 * cell})  # (3, 3)
        canvas.click(position={"x": 4.5 * cell, "y": 3.5 * cell})  # (3, 4)
        page.locator("#predict-picker .vx").focus()
        page.keyboard.press("ArrowDown")  # the keyboard's patch starts at (3, 4) after the last click
        page.keyboard.press("Space")  # (4, 4)
        page.wait_for_function("() => document.querySelector('#predict-picker .vx-cap').dataset.patches === "
                               "'3,3;3,4;4,4'", timeout=10_000)
        page.wait_for_selector("#predict-choice img", state="visible", timeout=120_000)
        idle(page)
        assert "tm_patches=3%2C3%3B3%2C4%3B4%2C4" in page.url
        said = page.inner_text("body")
        assert "Your choice ranks" in said and "of 7 among the chart's bars" in said  # your choice, 5 maps, random mean
        again = ctx.new_page()
        again.goto(page.url)  # the link: the marks come back, and are tested when the panel opens
        again.wait_for_selector("#classify-maps img", state="attached", timeout=120_000)
        idle(again)
        again.get_by_text("Predict, then test", exact=True).click()
        again.wait_for_function("() => document.querySelector('#predict-picker .vx-cap')?.dataset.patches === "
                                "'3,3;3,4;4,4'", timeout=60_000)
        again.wait_for_selector("#predict-choice img", state="visible", timeout=120_000)
    finally:
        ctx.close()


def test_a_link_opens_its_section_and_brings_it_into_view(browser, app_url):
    """?open=deletion (a shipped lesson's step): the tab opens with that section open, computed, and its curves in
    the first screen under the lesson's bar (the section's head may go above: the controls come before them)."""
    ctx, page = open_tab(browser, app_url, "classify", height=720,
                         query="image=scene_star&lesson=test_the_map&step=3&open=deletion")
    try:
        page.wait_for_selector("#deletion-curves img", state="visible", timeout=120_000)
        idle(page)
        page.wait_for_function(ON_FIRST_SCREEN, arg="#deletion-curves", timeout=30_000)
        assert page.locator("#deletion-box > .label-wrap.open").count() == 1
        sync_api.expect(page.locator("#lesson-bar")).to_contain_text("step 3 of 5")
    finally:
        ctx.close()
