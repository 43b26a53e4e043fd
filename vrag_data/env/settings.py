"""Settings of the environment (one per recipe; extra="forbid" so a typo fails before work)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vrag_data.env.geometry import CROP_MARGIN, MIN_CROP, QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, CoordSpace, ResizeRule


class EnvPrompts(BaseModel):
    """Texts the environment puts into observations. `{reason}` / `{listing}` / `{pages}` are filled in."""

    model_config = ConfigDict(extra="forbid")
    invalid: str = (
        "Your last reply could not be carried out: {reason}. Reply again: reason inside <think>...</think>, "
        "then give exactly one action."
    )
    search: str = ""  # shown with the retrieved page image(s)
    candidates: str = "The search returned these pages:\n{listing}\nSelect the relevant ones by their numbers."
    text_hits: str = "Search results:\n{listing}"
    text_hits_empty: str = "None of these keywords occur in the document. Try other keywords or read pages directly."
    no_new_pages: str = (
        "This search found no page you have not already seen. Try a different query, or answer with what you have found."
    )
    select: str = ""
    crop: str = ""
    read: str = ""  # the recipe replaces it with what the reader model says about the pages
    forced_answer: str = (
        "You have used all your turns. Give your final answer now inside <answer>...</answer>, "
        "based on everything you have found so far."
    )


class EnvSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # coordinates the model writes boxes in: qwen2.5-vl = pixels of the resized page it was shown
    coord_space: CoordSpace = "qwen2.5-vl"
    page_resize: Literal["smart", "sqrt_budget", "none"] = "smart"
    page_min_pixels: int = QWEN_MIN_PIXELS
    page_max_pixels: int = QWEN_MAX_PIXELS
    # search: "first_unseen" shows the best page not shown before (VRAG-RL, VISOR); "candidates" shows the
    # top_k unseen pages for <select> (UniDoc-RL); "text_hits" lists matching pages as text (MM-Doc-R1)
    search_mode: Literal["first_unseen", "candidates", "text_hits"] = "first_unseen"
    top_k: int = Field(1, ge=1, le=20)
    search_depth: int = Field(20, ge=1, le=200)  # hits fetched per query to find unseen pages
    scope: Literal["corpus", "document"] = "corpus"  # "document": only the task's own document
    dedup: bool = True
    allow_repeat_search: bool = False
    require_search_before_answer: bool = True
    select_base: Literal[0, 1] = 1  # numbering of candidates in the listing and in <select>
    crop_margin: float = CROP_MARGIN
    # a crop is shown (and exported) at no fewer pixels than this, smart-resized up like a page; None = its own size
    crop_min_pixels: int | None = Field(None, ge=QWEN_MIN_PIXELS)
    min_crop: float = MIN_CROP
    max_read_pages: int = Field(5, ge=1)
    snippet_chars: int = Field(240, ge=0)
    max_turns: int = Field(8, ge=1)
    max_invalid: int | None = None  # end the episode (status "error") after this many invalid actions
    prompts: EnvPrompts = Field(default_factory=EnvPrompts)

    def resize_rule(self) -> ResizeRule:
        return ResizeRule(self.page_resize, self.page_min_pixels, self.page_max_pixels)
