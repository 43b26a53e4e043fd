"""RL rows: one per (task, recipe) with a kept trajectory, built from that trajectory's prompt and the task."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from vrag_data.export.conversation import prompt_messages
from vrag_data.export.formats import RlItem
from vrag_data.export.hints import RecipeHints
from vrag_data.export.images import BadImage, ImageStore, MissingImage
from vrag_data.export.rl import evidence_ground_truth, task_to_rl
from vrag_data.export.sft_records import Skip, reword_coords
from vrag_data.schema.records import Message, Task


@dataclass
class RlSource:
    recipe: str
    prompt: list[Message]
    evidence: list[str]
    sufficient: Any = None  # sufficiency label when the run recorded one
    coord_space: str = ""  # the coordinate space the prompt was written for (the trajectory's `extra["coord_space"]`)


def rl_items(sources: Mapping[tuple[str, str], RlSource], tasks: Mapping[str, Task], tasks_dir: str,
             hints: RecipeHints, store: ImageStore, pages: Callable[[str], tuple[int, int]], skip: Skip,
             ability: str, family: str) -> Iterator[RlItem]:
    """The RL items in source order, numbered from 0; a task gone from the workspace or an unreadable image is a
    counted skip."""
    index = 0
    for (task_id, recipe), src in sources.items():
        task = tasks.get(task_id)
        if task is None:
            skip("rl", f"{task_id}:{recipe}", "task_not_found", f"task {task_id}: not in {tasks_dir}; re-import the tasks of this run")
            continue
        mp = hints.max_pixels(recipe)
        prompt, refs = prompt_messages(src.prompt)
        words = hints.coord_words(recipe)
        if words and src.coord_space:
            # the row's boxes are read in `family` space (extra_info["coord_space"]): its prompt says so, worded
            # exactly as the SFT records of the same export are
            prompt = [{**m, "content": reword_coords(m["content"], words, src.coord_space, family)} for m in prompt]
        try:
            images = [store.materialise(ref, mp, hints.crop_min_pixels(recipe), pending=True) for ref in refs]  # as the SFT records
        except (MissingImage, BadImage) as err:
            skip("rl", f"{task_id}:{recipe}", "missing_image" if isinstance(err, MissingImage) else "bad_image", f"task {task_id}: {err}")
            continue
        sizes = {}
        for p in task.evidence_pages:
            try:
                sizes[p] = pages(p)
            except KeyError:
                pass  # a gold page without an image: its boxes cannot be converted, the reward scores what it can
        h = hints(recipe)
        rec = task_to_rl(task, prompt, images, recipe, index, hints.data_source(recipe, task.benchmark), ability,
                         [r.page_id for r in refs], reward=(h.get("reward") or recipe), coord_space=family,
                         max_pixels=mp, page_sizes=sizes)
        if h.get("evidence_rows") and refs:
            # one-turn evidence recipes: the target holds the per-image gold evidence and the sufficiency-aware
            # answer, so the perception and derivation rewards have what they compare against
            shown = [r.page_id for r in refs]
            rec.reward_model.ground_truth = evidence_ground_truth(task, shown, src.evidence)
            rec.extra_info["sufficient"] = bool(task.evidence_pages) and set(task.evidence_pages) <= set(shown)
        elif src.sufficient is not None:
            rec.extra_info["sufficient"] = bool(src.sufficient)  # the run's label: VISOR's honesty gate reads it
        index += 1
        yield RlItem(rec, task, prompt, refs, recipe, mp, src.evidence, src.sufficient, evidence_rows=bool(h.get("evidence_rows")))
