"""OCR lines (text, box in page-image pixels, score) from RapidOCR, one engine per worker process.

RapidOCR 3 ships its PP-OCR ONNX models inside the wheel; the engine is pointed at those files explicitly
so it can never try to download anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_data.errors import MissingComponent
from vrag_data.ingest.geometry import Rect

_ENGINE: Any = None
_ENGINE_THREADS: int | None = None


@dataclass
class OcrLine:
    text: str
    rect: Rect  # raw pixels of the page image
    score: float


def quad_to_rect(quad: Any) -> Rect:
    xs = [float(p[0]) for p in quad]
    ys = [float(p[1]) for p in quad]
    return (min(xs), min(ys), max(xs), max(ys))


def _model_files() -> dict[str, str]:
    import rapidocr

    root = Path(rapidocr.__file__).parent / "models"
    found = {}
    for key, pattern in (("Det.model_path", "*det*.onnx"), ("Rec.model_path", "*rec*.onnx"), ("Cls.model_path", "*cls*.onnx")):
        hits = sorted(root.glob(pattern))
        if not hits:
            raise MissingComponent(f"RapidOCR model {pattern} not found in {root}; reinstall rapidocr or use --ocr off")
        found[key] = str(hits[-1])
    return found


def rapidocr_engine(threads: int | None = None) -> Any:
    """The process-wide engine (loading costs ~1 s); rebuilt only if the thread count changes."""
    global _ENGINE, _ENGINE_THREADS
    if _ENGINE is None or threads != _ENGINE_THREADS:
        from rapidocr import RapidOCR

        params: dict[str, Any] = {"Global.log_level": "error", **_model_files()}
        n = threads or 0
        params["EngineConfig.onnxruntime.intra_op_num_threads"] = n if n > 0 else -1
        params["EngineConfig.onnxruntime.inter_op_num_threads"] = 1 if n > 0 else -1
        # Reusing the memory arena between pages saves ~15% of the CPU per page (page faults otherwise).
        params["EngineConfig.onnxruntime.enable_cpu_mem_arena"] = True
        # One line per recognition call: batched lines are padded to the widest, which costs CPU and drops the
        # spaces between words ("EricKelleher"); on 29 slide pages 6% less CPU and 12 pages read better.
        params["Rec.rec_batch_num"] = 1
        _no_spinning()
        _ENGINE = RapidOCR(params=params)
        _ENGINE_THREADS = threads
    return _ENGINE


def _no_spinning() -> None:
    """onnxruntime's worker threads spin-wait between operators by default: on cores shared with other
    workers that burns CPU without doing work. RapidOCR has no setting for it (and builds its sessions
    lazily, on first use), so the options class its onnxruntime backend uses is swapped, once per process,
    for one with spinning off."""
    try:
        import onnxruntime as ort
        from rapidocr.inference_engine.onnxruntime import main as ort_main
    except ImportError:  # another RapidOCR layout: keep its defaults
        return
    if getattr(ort_main.SessionOptions, "_vrag_quiet", False):
        return

    class _Quiet(ort.SessionOptions):  # type: ignore[misc]
        _vrag_quiet = True

        def __init__(self) -> None:
            super().__init__()
            self.add_session_config_entry("session.intra_op.allow_spinning", "0")

    ort_main.SessionOptions = _Quiet


def rapidocr_lines(image: Any, threads: int | None = None) -> list[OcrLine]:
    """OCR one RGB page image (PIL image or HxWx3 array)."""
    import numpy as np

    arr = np.asarray(image)
    result = rapidocr_engine(threads)(arr)
    if result.boxes is None or result.txts is None:
        return []
    scores = result.scores if result.scores is not None else [None] * len(result.txts)
    return [
        OcrLine(text=t, rect=quad_to_rect(b), score=float(s) if s is not None else 0.0)
        for b, t, s in zip(result.boxes, result.txts, scores)
        if t and t.strip()
    ]


def usable_cores() -> int:
    """Cores this process may run on (a batch scheduler's or `taskset`'s CPU set, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_threads(workers: int) -> int:
    return max(1, usable_cores() // max(1, workers))
