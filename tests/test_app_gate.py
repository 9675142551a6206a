"""The launched app's side doors: every parameter of every endpoint refused with a message, refusals logged in one
line, many fresh sessions kept to the declared cap, and the explorer's row fetches answered with a file."""

from __future__ import annotations

import json
import logging
import math
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from conftest import EXAMPLES, local_client, raw_call

from vitviz.app import serving
from vitviz.specs import registry

pytestmark = pytest.mark.slow


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@pytest.fixture(scope="module")
def star(app_url) -> dict:
    """The star scene uploaded as a script uploads it."""
    with open(EXAMPLES / "scene_star.png", "rb") as f:
        path = httpx.post(f"{app_url}gradio_api/upload", files={"files": ("star.png", f, "image/png")}).json()[0]
    return {"path": path, "meta": {"_type": "gradio.FileData"}}


def bad_values(param: dict) -> list:
    """Values a parameter must refuse, from its schema: wrong types, NaN, ±infinity, out of range, unknown choice."""
    t = param.get("python_type", {}).get("type", "")
    if t in ("int", "float"):
        return [None, "abc", [1], {"a": 1}, math.nan, math.inf, -math.inf, 1e12, -1e12]
    if t == "bool":
        return ["maybe", [1], {"a": 1}, 7]
    if t.startswith("Literal"):
        return ["no-such-choice", None, [1], 3.5]
    if "str" in t:  # a patch as 'row,column'
        return ["a,b", [1, 2, 3], {"a": 1}, "1,2,3"]
    raise AssertionError(f"a parameter type this test does not know: {param}")


def test_every_wrong_value_in_every_parameter_of_every_endpoint_gets_a_message(app_url, star):
    api = local_client(app_url).view_api(return_format="dict", print_info=False)["named_endpoints"]
    calls = []
    for name, info in api.items():
        params = info["parameters"]
        args = [star if p["parameter_name"] == "image" else p.get("parameter_default") for p in params]
        for i, p in enumerate(params):
            if p["parameter_name"] == "image":
                continue
            for bad in bad_values(p):
                calls.append((name.lstrip("/"), p["parameter_name"], args[:i] + [bad] + args[i + 1:]))
    assert len(calls) > 500 and len({c[0] for c in calls}) >= 20

    def one(call):
        name, param, args = call
        body = json.dumps(args, allow_nan=True)[1:-1]  # NaN and Infinity as scripts send them
        return call, raw_call(app_url, name, body)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, calls))
    wrong = []
    for (name, param, _), text in answers:
        data = text.split("data:", 1)[-1].strip()
        message = json.loads(data, parse_constant=lambda c: pytest.fail(f"{c} in an answer is not JSON"))
        if "event: error" not in text or f"`{param}`" not in str(message) or "must be" not in str(message):
            wrong.append((name, param, text[:200]))
    assert not wrong, f"{len(wrong)} of {len(answers)} bad values without a message naming the parameter: {wrong[:5]}"


def test_a_refused_request_is_one_log_line_not_a_traceback(app_url, star, caplog, capfd):
    caplog.set_level(logging.INFO, logger="vitviz")
    capfd.readouterr()
    text = raw_call(app_url, "patches", json.dumps([star, 16, "abc", "crop", "ViT-B", True])[1:-1])
    assert "event: error" in text and "`resolution`" in text
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
    lines = [r.getMessage() for r in caplog.records if r.name == "vitviz" and "resolution" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("refused patches: `resolution`")


def test_two_thousand_fresh_sessions_stay_under_the_session_cap(served):
    """2,000 sessions, each one queued event that asks for nothing (the explorer's send-back with no picture:
    answered at once) and reads its answer."""
    demo, url = served
    again = next(b._id for b in demo.blocks.values() if getattr(b, "elem_id", None) == "attention-again")
    dep = next(i for i, d in enumerate(demo.config["dependencies"]) if [again, "change"] in
               [list(t) for t in d["targets"]])
    before = rss_mib()
    with httpx.Client(timeout=60) as http:
        def one(_):
            session = uuid.uuid4().hex
            r = http.post(f"{url}gradio_api/queue/join",
                          json={"session_hash": session, "fn_index": dep, "trigger_id": again,
                                "data": ["", registry.OFFLINE_KEY, 64, "mean", 0.0, "{}"]})
            r.raise_for_status()
            with http.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": session}) as events:
                for line in events.iter_lines():
                    if "process_completed" in line:
                        return '"success": true' in line or '"success":true' in line
            return False

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(one, range(2000)))
    assert all(answers)
    assert len(demo.state_holder.session_data) <= serving.SESSIONS == 500
    grown = rss_mib() - before
    assert grown < serving.SESSIONS * 0.6 + 100, f"2,000 sessions took {grown:.0f} MiB"
