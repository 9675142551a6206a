"""The page's look: a light theme that stays light, projector mode's text sizes, the stylesheets."""

from __future__ import annotations

import gradio as gr

from vitviz import assets

PROJECTOR_PX = {"text_xxs": 18, "text_xs": 20, "text_sm": 20, "text_md": 22, "text_lg": 24, "text_xl": 28,
                "text_xxl": 32}
"""Projector mode's page text sizes: nothing under 20 px but the smallest print (slider ends)."""


def light_only(theme: gr.themes.Base) -> gr.themes.Base:
    """The theme with its dark palette replaced by the light one: a dark-mode browser gets the light page at once.

    (The figures are drawn on white; forcing light mode by reloading with ?__theme=light flashed for ~1.3 s.)
    """
    same = {name: getattr(theme, name[:-len("_dark")]) for name in vars(theme)
            if name.endswith("_dark") and hasattr(theme, name[:-len("_dark")])}
    return theme.set(**same)


def projector_css(theme: gr.themes.Base) -> str:
    """CSS for body.vx-projector: the theme's text sizes, and every size defined from them, made large."""
    sizes = {f"--{k.replace('_', '-')}": f"{v}px" for k, v in PROJECTOR_PX.items()}
    for name, value in vars(theme).items():  # e.g. block_label_text_size = "*text_sm"
        if name.endswith("text_size") and isinstance(value, str) and value.startswith("*"):
            px = PROJECTOR_PX.get(value[1:])
            if px:
                sizes[f"--{name.replace('_', '-')}"] = f"{px}px"
    return "body.vx-projector, body.vx-projector .gradio-container {" + "; ".join(
        f"{k}: {v}" for k, v in sizes.items()) + "}"


def theme() -> gr.themes.Base:
    """Gradio's default theme, light only, with WCAG 2.1 AA contrast: subdued text (slider ends, help text, the
    footer) at neutral-600 instead of neutral-400 (1.9:1 on white), and the primary button's white text on
    primary-700 (6.7:1) instead of primary-500 (3.7:1)."""
    t = gr.themes.Default(text_size=gr.themes.sizes.text_lg, primary_hue="blue")
    t = t.set(body_text_color_subdued="*neutral_600", button_primary_background_fill="*primary_700",
              button_primary_background_fill_hover="*primary_800", button_primary_text_color="white",
              button_primary_border_color="*primary_700")
    return light_only(t)


def styles(t: gr.themes.Base) -> dict:
    """Theme, CSS and stylesheets for ``launch()`` (Gradio 6 takes them there)."""
    return dict(theme=t, css=projector_css(t), css_paths=[assets.THEME])
