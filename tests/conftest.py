"""Shared fixtures: offline by default, checkpoints the tests build themselves, a running app."""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # these machines have no hub; never wait on it
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
import tempfile  # noqa: E402

HF_HOME = Path(tempfile.mkdtemp(prefix="vitviz-tests-hf-"))
os.environ["HF_HOME"] = str(HF_HOME)  # a private hub cache: what the tests put there, nothing of this machine's

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:  # the fast set's workers share the cores, not each all
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

from vitviz.core import owned
from vitviz import assets  # noqa: E402  (the installed package: pip install -e .)

EXAMPLES = assets.EXAMPLES
ROOT = Path(__file__).resolve().parent.parent
"""The checkout (for the README and app.py); the package itself is the installed one."""


def module_of(runner) -> torch.nn.Module:
    """Tests only: the model a Runner owns, for independent reference computations and for checking that hooks
    and fused-attention flags are gone (nothing in vitviz reaches it outside the Runner)."""
    return runner._module


def local_client(url: str, **kwargs):
    """A gradio_client Client of an app on 127.0.0.1 (plain HTTP). It opens a new httpx connection for every request
    (upload, queue, event stream, each file), and httpx builds an SSL context for each, loading certifi's bundle:
    about 27 ms a request here, 15 s of tests/test_app_client.py. Plain HTTP has no certificate to check
    (``ssl_verify=False``: an empty context, 0.2 ms)."""
    from gradio_client import Client

    return Client(url, verbose=False, ssl_verify=False, **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def dino_s8_dir(tmp_path_factory) -> Path:
    """A DINO ViT-S/8-shaped transformers checkpoint (random weights, the real config) saved locally."""
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    d = tmp_path_factory.mktemp("dino_vits8")
    torch.manual_seed(0)
    cfg = ViTConfig(image_size=224, patch_size=8, hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                    intermediate_size=1536, qkv_bias=True, layer_norm_eps=1e-6)
    ViTModel(cfg, add_pooling_layer=False).save_pretrained(d)
    ViTImageProcessor(do_resize=True, size={"height": 224, "width": 224}, image_mean=[0.485, 0.456, 0.406],
                      image_std=[0.229, 0.224, 0.225]).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def dinov2_reg_dir(tmp_path_factory) -> Path:
    """A small DINOv2-with-registers checkpoint (4 registers), saved locally."""
    from transformers import BitImageProcessor, Dinov2WithRegistersConfig, Dinov2WithRegistersModel

    d = tmp_path_factory.mktemp("dinov2_reg")
    torch.manual_seed(0)
    cfg = Dinov2WithRegistersConfig(image_size=56, patch_size=14, hidden_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_register_tokens=4)
    Dinov2WithRegistersModel(cfg).save_pretrained(d)
    BitImageProcessor(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56},
                      image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def deit_file(tmp_path_factory) -> Path:
    """A DeiT-Ti/16 (timm architecture, random weights) saved as safetensors."""
    import timm
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = timm.create_model("deit_tiny_patch16_224", pretrained=False)
    path = tmp_path_factory.mktemp("deit") / "model.safetensors"
    save_file(model.state_dict(), str(path))
    return path


@contextmanager
def in_hub_cache(key: str, files: Path | dict[str, Path]):
    """Registry model ``key`` in the (private) local Hugging Face cache, laid out as its download (``files``: a
    transformers folder, or {name in the repo: file} for timm's ``model.safetensors``): the registry loads it
    through its real loader (yielded). Removed afterwards; what was found unavailable is looked for again."""
    import shutil

    import timm

    from benchmarks import hubcache
    from vitviz.models import cache as models
    from vitviz.specs import registry

    spec = registry.REGISTRY[key]
    repo = spec.source if spec.family == "hf" else timm.models.get_pretrained_cfg(spec.source).hf_hub_id
    snapshot = hubcache.install(HF_HOME, repo, files)
    owned.reset("models")
    try:
        yield models.get_model(key)
    finally:
        shutil.rmtree(snapshot.parent.parent)
        owned.reset("models")


@pytest.fixture
def dino_in_cache(dino_s8_dir):
    """DINO ViT-S/8 in the local Hugging Face cache, as a download of ``facebook/dino-vits8`` (the real config,
    random weights), loaded by the registry's real loader."""
    with in_hub_cache("DINO ViT-S/8", dino_s8_dir) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def rgb_cat() -> np.ndarray:
    from vitviz.core.images import load_rgb

    return load_rgb(EXAMPLES / "cat.png")


def raw_call(app_url: str, api: str, data_json: str) -> str:
    """POST ``{"data": [...]}`` as raw text (NaN, Infinity, data: URLs: whatever any JSON library or script may
    send) to an endpoint and return the event stream's answer (``event: complete`` or ``event: error``)."""
    import httpx

    r = httpx.post(f"{app_url}gradio_api/call/{api}", content='{"data": [%s]}' % data_json,
                   headers={"content-type": "application/json"}, timeout=30)
    r.raise_for_status()
    text = httpx.get(f"{app_url}gradio_api/call/{api}/{r.json()['event_id']}", timeout=120).text
    return final_event(text)


def final_event(stream: str) -> str:
    """The last ``event: complete`` or ``event: error`` of an event stream's text, as sent. A request queued longer
    than gradio's heartbeat interval (15 s, as under a busy CI machine) first receives ``event: heartbeat`` with
    ``data: null``: that is no answer, and reading it as one would fail a test for the machine's speed."""
    events = [e for e in stream.replace("\r\n", "\n").split("\n\n") if e.strip()]
    final = [e for e in events if e.startswith(("event: complete", "event: error"))]
    assert final, f"no answer in the event stream: {stream[:300]!r}"
    return final[-1] + "\n\n"


@pytest.fixture(scope="session")
def served():
    """The real app, launched on 127.0.0.1 for the whole session: (its Blocks, its URL)."""
    from vitviz import app
    from vitviz.app import serving

    demo = app.build_demo()
    # as `python -m vitviz.app` does: the server's memory watcher collects what requests made, not this whole test
    # process (each full collection here cost 0.3-0.5 s and held every thread: 13 s of tests/test_app_client.py)
    serving.freeze_what_lasts()
    port = free_port()
    kwargs = app.launch_kwargs()
    kwargs.update(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    demo.launch(**kwargs)
    serving.read_long_heads(demo)  # as `python -m vitviz.app` does
    yield demo, f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.fixture(scope="session")
def app_url(served):
    """The URL of the app launched for the whole session."""
    return served[1]


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per browser test module (those modules skip or fail first when it is missing)."""
    from browser_support import ARGS, CHROMIUM, sync_api

    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()
