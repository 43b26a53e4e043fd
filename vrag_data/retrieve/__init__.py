"""Page retrieval: BM25 (corpus-wide and per document), ColPali/ColQwen with local weights, and the
VRAG-RL-compatible search server (`vrag_data.retrieve.server`)."""

from vrag_data.retrieve.base import SearchHit, Searcher
from vrag_data.retrieve.bm25 import BM25Index, Bm25Params, UnknownDocument
from vrag_data.retrieve.build import IndexBuildResult, build_index, load_index

__all__ = ["SearchHit", "Searcher", "BM25Index", "Bm25Params", "UnknownDocument", "IndexBuildResult",
           "build_index", "load_index"]
