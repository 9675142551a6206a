"""``vitviz crop --engine ray``: the planned batches of :mod:`vitviz.tools.crop` on a Ray cluster.

Ray Data maps the batches over a pool of actors (``map_batches`` with a class: each actor loads the model once and
keeps it); every actor runs :func:`vitviz.tools.crop.crop_batch`, the local engine's own function, on the batches
it is given, so the crops and ``boxes.csv`` are the local engine's, byte for byte. Crops and records are written
by the workers straight into the output folder, which must therefore be one that every node can write (the local
disk for a cluster on this machine; a shared file system for several). Ray is an extra (``pip install
'vitviz[ray]'``), imported only here.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from vitviz.tools.crop import Item, Skip, crop_batch


class RayMissing(RuntimeError):
    """Ray is not installed here."""


class CropActor:
    """One worker of the pool: the model loaded once, then one planned batch per call."""

    def __init__(self, values: dict, out: str) -> None:
        import torch

        from vitviz.models import cache as models

        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))  # Ray gives each actor its CPUs
        self.values, self.out = values, Path(out)
        self.runner = models.get_model(values["model"])

    def __call__(self, rows: dict) -> dict:
        records, skipped = [], []
        for text in rows["batch"]:
            batch = [Item(**item) for item in json.loads(str(text))]
            done, skip = crop_batch(self.runner, batch, self.values, self.out)
            records.append(json.dumps(done))
            skipped.append(json.dumps([asdict(s) for s in skip]))
        return {"records": records, "skipped": skipped}


def run(batches: list[list[Item]], values: dict, out: Path, address: str | None = None,
        workers: int | None = None) -> tuple[list[dict], list[Skip]]:
    """Crop ``batches`` on Ray: an existing cluster at ``address`` ('auto', 'ray://host:10001'), or a local one
    started on this machine's cores and stopped afterwards. ``workers`` actors (default: one per CPU of the
    cluster, at most one per batch), one CPU each. Returns (records written, pictures skipped)."""
    try:
        import ray
    except ImportError:
        raise RayMissing("--engine ray needs Ray: pip install 'vitviz[ray]' (or 'ray[data]').") from None
    if not batches:
        return [], []
    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    try:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        pool = max(1, min(workers or cpus, len(batches)))
        ds = ray.data.from_items([{"batch": json.dumps([asdict(i) for i in b])} for b in batches],
                                 override_num_blocks=len(batches))
        shared = {"values": dict(values), "out": str(Path(out).resolve())}
        done = ds.map_batches(CropActor, fn_constructor_kwargs=shared, batch_size=1, concurrency=pool, num_cpus=1)
        records, skipped = [], []
        for row in done.iter_rows():
            records += json.loads(row["records"])
            skipped += [Skip(**s) for s in json.loads(row["skipped"])]
        return records, skipped
    finally:
        if started:
            ray.shutdown()
