"""Page retrieval: BM25 (corpus-wide and per document), dense (local sentence-transformers model), hybrid (rank
fusion), ColPali/ColQwen with local weights, query normalisation, and the VRAG-RL-compatible search server
(`vrag_data.retrieve.server`)."""

from vrag_data.retrieve.base import SearchHit, Searcher
from vrag_data.retrieve.bm25 import BM25Index, Bm25Params, UnknownDocument
from vrag_data.retrieve.build import IndexBuildResult, build_from_config, build_index, index_kind, load_index

__all__ = ["SearchHit", "Searcher", "BM25Index", "Bm25Params", "UnknownDocument", "IndexBuildResult",
           "build_from_config", "build_index", "index_kind", "load_index"]
