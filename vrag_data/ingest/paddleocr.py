"""PaddleOCR adapter: its CLI from its own environment (`VRAG_PADDLEOCR_CMD`) with local model folders
(`VRAG_PADDLEOCR_MODEL_DIR`, one `*det*` and one `*rec*` folder). Missing -> one-line error, never RapidOCR.

PaddleOCR 3 writes one `<name>_res.json` per input image with `rec_texts`, `rec_scores` and `rec_boxes`
(x0, y0, x1, y1) or `rec_polys` (quads) in pixels of that image: our page image, so no rescaling.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from vrag_data.errors import MissingComponent, VragError
from vrag_data.ingest.ocr import OcrLine, quad_to_rect
from vrag_data.ingest.options import PaddleOcrSettings

FIX = "use --ocr rapidocr"


def paddle_result_lines(result: dict[str, Any]) -> list[OcrLine]:
    """One PaddleOCR result JSON (optionally wrapped in `{"res": ...}`) -> OCR lines (pure)."""
    res = result.get("res", result)
    texts = res.get("rec_texts") or []
    scores = res.get("rec_scores") or [0.0] * len(texts)
    boxes = res.get("rec_boxes")
    polys = res.get("rec_polys")
    out = []
    for i, text in enumerate(texts):
        if not str(text).strip():
            continue
        if boxes is not None and i < len(boxes) and len(boxes[i]) == 4 and not isinstance(boxes[i][0], (list, tuple)):
            x0, y0, x1, y1 = (float(v) for v in boxes[i])
            rect = (x0, y0, x1, y1)
        elif polys is not None and i < len(polys):
            rect = quad_to_rect(polys[i])
        else:
            continue
        out.append(OcrLine(text=str(text), rect=rect, score=float(scores[i]) if i < len(scores) else 0.0))
    return out


def _resolve(settings: PaddleOcrSettings) -> tuple[list[str] | None, str | None]:
    cmd = settings.command or os.environ.get("VRAG_PADDLEOCR_CMD") or shutil.which("paddleocr")
    return (shlex.split(cmd) if cmd else None), settings.model_dir or os.environ.get("VRAG_PADDLEOCR_MODEL_DIR") or None


def model_folders(model_dir: str) -> tuple[Path, Path] | None:
    root = Path(model_dir)
    if not root.is_dir():
        return None
    dirs = [d for d in root.iterdir() if d.is_dir()]
    det = [d for d in dirs if "det" in d.name.lower()]
    rec = [d for d in dirs if "rec" in d.name.lower()]
    return (det[0], rec[0]) if det and rec else None


def check_paddleocr(settings: PaddleOcrSettings) -> None:
    cmd, model_dir = _resolve(settings)
    if not cmd or not (shutil.which(cmd[0]) or Path(cmd[0]).is_file()):
        raise MissingComponent(
            "--ocr paddleocr needs the PaddleOCR CLI from its own environment: set VRAG_PADDLEOCR_CMD "
            f"(no `paddleocr` on PATH) and VRAG_PADDLEOCR_MODEL_DIR; or {FIX}"
        )
    if not model_dir or model_folders(model_dir) is None:
        raise MissingComponent(
            f"PaddleOCR models not found: VRAG_PADDLEOCR_MODEL_DIR={model_dir or '(unset)'} must hold local "
            f"*det* and *rec* model folders (nothing is downloaded); or {FIX}"
        )


def run_paddleocr(images: dict[int, str], settings: PaddleOcrSettings) -> dict[int, list[OcrLine]]:
    """OCR page images (1-based page -> local path) in one CLI call."""
    cmd, model_dir = _resolve(settings)
    folders = model_folders(model_dir or "")
    if not cmd or folders is None:
        check_paddleocr(settings)  # raises the one-line reason
        raise AssertionError("unreachable")
    det, rec = folders
    with tempfile.TemporaryDirectory(prefix="vrag-paddle-") as tmp:
        inp, out = Path(tmp) / "in", Path(tmp) / "out"
        inp.mkdir()
        for pno, path in images.items():
            os.symlink(os.path.abspath(path.removeprefix("file://")), inp / f"p{pno}.jpg")
        args = [*cmd, "ocr", "-i", str(inp), "--save_path", str(out), "--text_detection_model_dir", str(det),
                "--text_recognition_model_dir", str(rec), "--use_doc_orientation_classify", "False",
                "--use_doc_unwarping", "False", "--use_textline_orientation", "False", "--device", "cpu"]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=settings.timeout_s)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise VragError(f"PaddleOCR failed (exit {proc.returncode}): {last[:300]}")
        found: dict[int, list[OcrLine]] = {}
        for f in sorted(out.rglob("*.json")):
            m = re.match(r"p(\d+)", f.name)
            if m:
                found[int(m.group(1))] = paddle_result_lines(json.loads(f.read_text(encoding="utf-8")))
        return found
