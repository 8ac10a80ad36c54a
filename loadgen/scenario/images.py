"""workload.images: synthetic images for chat requests, seeded and made locally (no download).

    Images {count, width, height, format, pool} + workload.seed
        ─► ImagePool: ``pool`` distinct images, made once before the run: a coarse seeded colour
           field (width/16 x height/16 random pixels) scaled up bicubically, plus seeded grain —
           photo-like: a PNG of it is not the near-incompressible size of pure noise, nor the
           trivially small size of a flat fill ─► PNG or JPEG (quality 90) ─► data URL
        ─► ImagePool.for_request(k): request k's ``count`` images, dealt in turn from the pool
           (image j of request k = pool[(k·count + j) mod pool])

Pure given the seed: the same scenario makes the same bytes. The workload's token counts cover
the text only; a vision server adds its own image tokens to usage.prompt_tokens.
"""
from __future__ import annotations

import base64
import io
from typing import Optional

import numpy as np

MIME = {"png": "image/png", "jpeg": "image/jpeg"}


def make_image(seed: int, k: int, width: int, height: int, fmt: str) -> bytes:
    """Image ``k`` of the pool seeded by ``seed``: ``width`` x ``height`` RGB, encoded as ``fmt``."""
    from PIL import Image                    # lazy: only scenarios with images need Pillow
    rng = np.random.default_rng([seed, 5, k])
    coarse = rng.integers(0, 256, size=(max(1, height // 16), max(1, width // 16), 3),
                          dtype=np.uint8)
    img = Image.fromarray(coarse, "RGB").resize((width, height), Image.BICUBIC)
    px = np.asarray(img, dtype=np.int16) + rng.integers(-6, 7, size=(height, width, 3))
    img = Image.fromarray(np.clip(px, 0, 255).astype(np.uint8), "RGB")
    buf = io.BytesIO()
    if fmt == "jpeg":
        img.save(buf, format="JPEG", quality=90)
    else:
        img.save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def data_url(raw: bytes, fmt: str) -> str:
    return f"data:{MIME[fmt]};base64," + base64.b64encode(raw).decode("ascii")


class ImagePool:
    """The pool of one workload's images, made at construction (before any request is sent)."""

    def __init__(self, spec, seed: int):
        self.spec = spec
        raws = [make_image(seed, k, spec.width, spec.height, spec.format) for k in range(spec.pool)]
        self.sizes = [len(r) for r in raws]
        self.urls = tuple(data_url(r, spec.format) for r in raws)

    def for_request(self, k: int) -> tuple:
        n, c = len(self.urls), self.spec.count
        return tuple(self.urls[(k * c + j) % n] for j in range(c))

    def describe(self) -> dict:
        s = self.spec
        return {"count": s.count, "width": s.width, "height": s.height, "format": s.format,
                "pool": s.pool, "bytes_mean": float(np.mean(self.sizes)),
                "bytes_max": max(self.sizes)}


def pool_for(spec, seed: int) -> Optional[ImagePool]:
    return ImagePool(spec, seed) if spec is not None else None
