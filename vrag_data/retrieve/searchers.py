"""Searchers built from other searchers: a hybrid that fuses several rankings, and query normalisation in front.

`load_index` composes them from what the workspace's index holds, so every consumer (search server, agent
environments, question verification, students) gets the same retrieval, queries rewritten the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vrag_data.retrieve.base import Searcher, SearchHit
from vrag_data.retrieve.bm25 import PageMeta
from vrag_data.retrieve.fusion import rrf
from vrag_data.retrieve.normalize import QueryOptions, normalize_query


class HybridSearcher:
    """Reciprocal rank fusion of several searchers over the same pages; implements `Searcher`.

    Each component ranks `depth` pages (at least `top_k`) in the scope; pages outside every list are not
    returned, which only matters when `top_k` exceeds `depth`."""

    def __init__(self, components: Sequence[tuple[str, Searcher, float]], k: float = 60.0, depth: int = 50) -> None:
        if not components:
            raise ValueError("a hybrid searcher needs at least one component")
        self.components = list(components)
        self.k = k
        self.depth = depth
        first = components[0][1]
        self.pages: list[PageMeta] = getattr(first, "pages", [])
        self.doc_stems = getattr(first, "doc_stems", {})

    @property
    def kind(self) -> str:
        return "hybrid(" + "+".join(f"{name}:{w:g}" for name, _, w in self.components) + f",rrf_k={self.k:g})"

    def search(self, queries: list[str], top_k: int = 5, doc_stem: str | None = None) -> list[list[SearchHit]]:
        depth = max(self.depth, top_k)
        ranked = [s.search(queries, top_k=depth, doc_stem=doc_stem) for _, s, _ in self.components]
        weights = [w for _, _, w in self.components]
        out = []
        for qi in range(len(queries)):
            lists = [r[qi] for r in ranked]
            by_id = {h.page_id: h for hits in lists for h in hits}
            fused = rrf([[h.page_id for h in hits] for hits in lists], weights, self.k)[:top_k]
            out.append([by_id[pid].model_copy(update={"score": score}) for pid, score in fused])
        return out


class NormalizedSearcher:
    """Rewrites each query with `normalize_query` before the inner searcher sees it; implements `Searcher`."""

    def __init__(self, inner: Searcher, options: QueryOptions | None = None,
                 aliases: Mapping[str, str] | None = None) -> None:
        self.inner = inner
        self.options = options or QueryOptions()
        self.aliases = dict(aliases or {})
        self.pages: list[PageMeta] = getattr(inner, "pages", [])
        self.doc_stems = getattr(inner, "doc_stems", {})

    @property
    def kind(self) -> str:
        return f"normalized({getattr(self.inner, 'kind', type(self.inner).__name__)})"

    def normalize(self, query: str) -> str:
        return normalize_query(query, self.options, self.aliases)

    def search(self, queries: list[str], top_k: int = 5, doc_stem: str | None = None) -> list[list[SearchHit]]:
        return self.inner.search([self.normalize(q) for q in queries], top_k=top_k, doc_stem=doc_stem)
