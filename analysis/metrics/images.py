"""Figures of a run whose chat requests carried images (``workload.images``), from its records.

    records with "input_images" + meta.json workload.images (the pool's sizes)
        ─► images_block(): requests with images, images sent, images per request, and the
           images' shape (width x height, format, mean encoded bytes) as the workload made them

The latencies of such a run are the usual ones (a vision server's TTFT includes encoding the
images); the workload's prompt token counts cover the text only, usage.prompt_tokens (the
server's) also the image tokens. Pure; None for a run without images.
"""
from __future__ import annotations

from typing import Optional

from analysis.metrics import figures as m
from analysis.contract.meta import ImagesShape, RunMeta
from analysis.contract.records import Records


def images_block(records: Records, meta: Optional[dict]) -> Optional[dict]:
    meas = m.measured(records)
    vals = m.field(meas, "input_images")
    if not any(vals):                               # the usual run: none (at C speed)
        return None
    recs = [r for r, v in zip(meas, vals) if v]
    wl = RunMeta.read(meta).workload
    shape = (wl.images if wl else None) or ImagesShape()
    total = sum(r.input_images for r in recs)
    done = m.completed(recs)
    usage = [r.prompt_tokens for r in done if r.prompt_tokens_source == "usage"]
    return {"requests": len(recs), "images": total, "per_request": total / len(recs),
            "width": shape.width, "height": shape.height,
            "format": shape.format, "bytes_mean": shape.bytes_mean,
            "pool": shape.pool,
            "usage_prompt_tokens_mean": sum(usage) / len(usage) if usage else None}
