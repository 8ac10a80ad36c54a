"""What a chat request's image parts were, for the request log (GET /calib/log ``images``).

    messages[*].content[*] {"type": "image_url", "image_url": {"url": "data:MIME;base64,..."}}
        ─► {"mime", "bytes", "width", "height"} per image (dimensions read by Pillow; None when
           the bytes are not an image it knows, or the URL is not a data URL)

The calibration server does not look at images otherwise: answers are timed as for text.
"""
from __future__ import annotations

import base64
import binascii
import io
from typing import Optional


def describe(url: str) -> dict:
    out: dict = {"mime": None, "bytes": None, "width": None, "height": None}
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return out
    head, _, b64 = url.partition(";base64,")
    out["mime"] = head[5:]
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return out
    out["bytes"] = len(raw)
    try:
        from PIL import Image
        with Image.open(io.BytesIO(raw)) as im:
            out["width"], out["height"] = im.size
    except Exception:  # not an image Pillow reads (or no Pillow): dimensions unknown
        pass
    return out


def images_of(messages) -> Optional[list]:
    """Every image part of ``messages`` described, or None when there is none."""
    found = []
    for m in messages or []:
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                url = (part.get("image_url") or {}).get("url")
                found.append(describe(url))
    return found or None
