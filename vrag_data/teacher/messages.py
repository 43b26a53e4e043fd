"""Our `Message`/`ImageRef` records -> OpenAI chat format, and the content-derived request key.

Images travel as JPEG data URIs. The request key (DESIGN.md "Ids") hashes the model, the messages with
every image replaced by the sha256 of its JPEG bytes, the sampling parameters, the seed and the sample
index, so a re-run finds the finished response whatever machine rendered the page.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from vrag_data.ids import stable_json
from vrag_data.schema.records import ImageRef, Message

# An image loader turns a reference into JPEG bytes at the recipe's pixel budget.
ImageLoader = Callable[[ImageRef], bytes]


def image_ref_key(ref: ImageRef) -> str:
    return stable_json(ref.model_dump(mode="json"))


def data_uri(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def _url(img: bytes | str) -> str:
    return img if isinstance(img, str) else data_uri(img)


def canonical_messages(messages: Sequence[Message], image_hashes: Sequence[str]) -> list[dict[str, Any]]:
    """Messages as plain data with images replaced by their hashes (the part of the key that names inputs)."""
    out: list[dict[str, Any]] = []
    it = iter(image_hashes)
    for m in messages:
        out.append({"role": m.role, "text": m.text, "images": [next(it) for _ in m.images]})
    return out


def request_key(model: str, messages: Sequence[Message], image_hashes: Sequence[str], sampling: dict[str, Any], sample: int) -> str:
    payload = [model, canonical_messages(messages, image_hashes), sampling, sample]
    return hashlib.sha256(stable_json(payload).encode()).hexdigest()


def to_openai(messages: Sequence[Message], images: Sequence[bytes | str]) -> list[dict[str, Any]]:
    """OpenAI chat messages; a message's images come before its text (the Qwen-VL convention).

    `images` are, for every `ImageRef` in message order, its JPEG bytes or an already built data URI.
    """
    out: list[dict[str, Any]] = []
    it = iter(images)
    for m in messages:
        if not m.images:
            out.append({"role": m.role, "content": m.text})
            continue
        parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": _url(next(it))}} for _ in m.images]
        if m.text:
            parts.append({"type": "text", "text": m.text})
        out.append({"role": m.role, "content": parts})
    return out


def workspace_image_loader(workspace: Any, *, max_pixels: int | None = None, min_pixels: int | None = None,
                           crop_min_pixels: int | None = None) -> ImageLoader:
    """A loader that renders pages/crops of a workspace with the environment's image helpers; crops are scaled
    up to at least `crop_min_pixels` (the recipe's standard crop resolution) when it is set."""
    from vrag_data.env.images import encode_jpeg, render_image_ref  # imported lazily: env is another stage

    kwargs: dict[str, Any] = {}
    if max_pixels is not None:
        kwargs["max_pixels"] = max_pixels
    if min_pixels is not None:
        kwargs["min_pixels"] = min_pixels

    def load(ref: ImageRef, **override: Any) -> bytes:  # the pool passes max_pixels=... when a call sets it
        args = {**kwargs, **override}
        if crop_min_pixels and (ref.box is not None or ref.stacked):
            args["min_pixels"] = max(int(args.get("min_pixels") or 0), crop_min_pixels)
        return encode_jpeg(render_image_ref(workspace, ref, **args))

    return load
