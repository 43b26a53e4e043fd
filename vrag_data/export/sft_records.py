"""Kept trajectory -> `SftRecord` (conversation in the target family's coordinates, images materialised); a
record that cannot be converted is skipped with its reason, never stops the export."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from typing import Any

from PIL import Image

from vrag_data.env.grammar import Grammar
from vrag_data.export.conversation import AlternationError, Conversation, trajectory_conversations
from vrag_data.export.images import BadImage, ImageStore, MissingImage
from vrag_data.schema.records import ChatTurn, SftRecord, Trajectory
from vrag_data.store import Workspace, read_table

Skip = Callable[[str, str, str, str], None]  # (kind, record id, reason code, reason)


class PageSizes:
    """Raw page sizes from the corpus table (one read), else from the image header."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.sizes: dict[str, tuple[int, int]] = {}
        try:
            t = read_table(ws.corpus_table("pages"))
            if t.num_rows and {"page_id", "width", "height"} <= set(t.column_names):
                for pid, w, h in zip(*(t.column(c).to_pylist() for c in ("page_id", "width", "height")), strict=True):
                    self.sizes[pid] = (int(w), int(h))
        except (FileNotFoundError, OSError):
            pass

    def __call__(self, page_id: str) -> tuple[int, int]:
        if page_id not in self.sizes:
            path = self.ws.page_image(page_id)
            if not self.ws.fs.exists(path):
                raise KeyError(page_id)
            with self.ws.fs.open(path, "rb") as f:
                self.sizes[page_id] = Image.open(io.BytesIO(f.read())).size
        return self.sizes[page_id]


def answer_evidence(traj: Trajectory) -> list[str]:
    """The evidence lines of the trajectory's answer (one-turn evidence form), empty without an answer."""
    for t in reversed(traj.turns):
        if t.action.kind == "answer":
            return list(t.action.evidence)
    return []


def reword_coords(text: str, words: Mapping[str, str], src_space: str, family: str) -> str:
    """`text` with the coordinate words of `src_space` replaced by those of `family`, so a prompt describes the
    boxes the exported record holds (a 0-1000 recipe exported for Qwen2.5-VL speaks pixels, and back)."""
    old, new = words.get(src_space), words.get(family)
    return text.replace(old, new) if old and new and old != new else text


def sft_records(traj: Trajectory, family: str, mp: int, pages: PageSizes, store: ImageStore, skip: Skip,
                words: Mapping[str, str] | None = None,
                crop_min_pixels: int | None = None, grammar: Grammar | None = None) -> list[tuple[Conversation, SftRecord]]:
    """The trajectory's SFT records: one per agent that answered under a prompt of its own (the first keeps the
    trajectory's id, another agent's is `<traj_id>:<role>`); none when the trajectory cannot be converted."""
    try:
        convs = trajectory_conversations(traj, family, mp, pages, grammar)
        src_space = str(traj.extra.get("coord_space") or "")
        images: list[list[str]] = []
        for _, conv in convs:
            if words and src_space:
                conv.system = reword_coords(conv.system, words, src_space, family)
                conv.turns = [t.model_copy(update={"content": reword_coords(t.content, words, src_space, family)})
                              if t.role == "user" else t for t in conv.turns]
            images.append([store.materialise(ref, mp, crop_min_pixels, pending=True) for ref in conv.images])
    except AlternationError as err:
        skip("sft", traj.traj_id, "alternation", str(err))
        return []
    except MissingImage as err:
        skip("sft", traj.traj_id, "missing_image", f"trajectory {traj.traj_id}: {err}")
        return []
    except BadImage as err:
        skip("sft", traj.traj_id, "bad_image", f"trajectory {traj.traj_id}: {err}")
        return []
    except Exception as err:  # noqa: BLE001 - one malformed record never stops the export
        skip("sft", traj.traj_id, "error", f"trajectory {traj.traj_id}: {type(err).__name__}: {err}")
        return []
    prov = traj.provenance
    out = []
    for (agent, conv), imgs in zip(convs, images, strict=True):
        messages = ([ChatTurn(role="system", content=conv.system)] if conv.system else []) + conv.turns
        metadata: dict[str, Any] = {
            "status": traj.status,
            "sample": traj.sample,
            "policy": prov.policy,
            "model_family": family,
            "boxes_converted": conv.boxes_converted,
            "boxes_unconverted": conv.boxes_unconverted,
            **({"agent": agent} if agent else {}),
        }
        rec = SftRecord(id=f"{traj.traj_id}:{agent}" if agent else traj.traj_id, recipe=traj.recipe, task_id=traj.task_id,
                        traj_id=traj.traj_id, messages=messages, images=imgs,
                        augmentation=str(traj.extra.get("augmentation") or ""), metadata=metadata)
        out.append((conv, rec))
    return out
