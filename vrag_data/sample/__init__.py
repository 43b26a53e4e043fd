"""Deterministic synthetic corpus (reports and slide decks with charts, tables, scanned pages) with gold QA."""

from vrag_data.sample.corpus import SampleCorpus, make_sample_corpus

__all__ = ["SampleCorpus", "make_sample_corpus"]
