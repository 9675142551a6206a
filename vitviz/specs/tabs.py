"""The page's tabs, each one declaration: its id, title, the view it opens with, its model lists and what it shows
once its first answer is there. The page's tab strip, the link's tab ids and model lists, the device switches and
the browser tests' expectations are made from these; the tab's layout is the module of ``vitviz/app`` that says
``@layout("<id>")`` (found, not listed). Adding a tab: its declaration here and its layout module.
"""

from __future__ import annotations

from dataclasses import dataclass

from vitviz.specs import views as declared
from vitviz.specs.state import Field, View


@dataclass(frozen=True)
class TabSpec:
    """One tab of the page.

    Attributes:
        id: its ``?tab=`` id.
        title: its name on the page.
        opens_with: the view it shows first (its other views follow).
        models: (setting, registry task) of each model list it offers; offline, each opens on the stand-in for
            that task.
        shows: a CSS selector of what the tab shows once its first answer is drawn (a lesson step without a
            section brings it into view; tests, screenshots).
        figures: its other figures a link can name (``show=<name>``: a lesson step brings that one into view
            instead), as (name, CSS selector).
        device: the page's key of its "compute on this device" switch, if it has one (``device=1`` in a link).
    """

    id: str
    title: str
    opens_with: View
    models: tuple[tuple[Field, str], ...] = ()
    shows: str = ""
    figures: tuple[tuple[str, str], ...] = ()
    device: str | None = None

    @property
    def device_key(self) -> str | None:
        """Its "compute on this device" controls' name in the page (``device`` with dashes): the element ids are
        ``<key>-switch``, ``<key>-panel`` and ``<key>-picture``, and ``vx-<key>-on`` marks the page while the
        switch is on. None for a tab without one."""
        return self.device.replace("_", "-") if self.device else None


TABS: dict[str, TabSpec] = {}
"""Every tab, in the page's order."""


def declare(tab: TabSpec) -> TabSpec:
    """Add ``tab`` to the page (after the tabs declared before it)."""
    if tab.id in TABS:
        raise ValueError(f"tab {tab.id!r} is declared twice")
    TABS[tab.id] = tab
    return tab


FIRST = "patches"
"""The tab a link without a (known) tab opens."""

declare(TabSpec("patches", "Patches", declared.PATCHES, shows="#patch-grid img"))
declare(TabSpec("forward", "Forward pass", declared.FORWARD, ((declared.FORWARD["model"], "forward"),),
                shows="#forward-diagram details", device="forward_device"))
declare(TabSpec("positions", "Position embeddings", declared.POSITIONS, shows="#pe-mosaic img"))
declare(TabSpec("attention", "Attention", declared.ATTENTION, ((declared.ATTENTION["model"], "attention"),),
                shows="#attention-explorer .vx-big canvas", device="device"))
declare(TabSpec("classify", "Classify", declared.CLASSIFY, ((declared.CLASSIFY["model"], "classify"),),
                shows="#classify-maps img", figures=(("top5", "#classify-top5"),), device="classify_device"))
declare(TabSpec("vitcnn", "ViT vs CNN", declared.RECEPTIVE_FIELD,
                ((declared.VS_VIT, "attention"), (declared.VS_CNN, "cnn"), (declared.VS_CLASSIFIER, "classify")),
                shows="#vitcnn-reach img"))
