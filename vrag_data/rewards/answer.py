"""Rule-based answer scorers (pure): exact match, token F1, ANLS, numeric tolerance and an
MMLongBench-Doc-style comparison that looks at the declared answer format (Int/Float/Str/List/None).

They serve three callers: the offline judge (oracle runs, CI), the fallback when a model judge is
unavailable, and verl's `compute_score`, which must be synchronous and cheap.
"""

from __future__ import annotations

import ast
import math
import re
import string
from collections import Counter
from collections.abc import Sequence

NOT_ANSWERABLE = "Not answerable"
INSUFFICIENT = "insufficient to answer"

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation) | {"\u2019", "\u2018", "\u201c", "\u201d", "\u2013", "\u2014"}

# Phrases a model uses to decline; matched on the normalised answer.
_DECLINE = (
    "not answerable",
    "unanswerable",
    "cannot be answered",
    "can not be answered",
    "cannot answer",
    "insufficient to answer",
    "insufficient information",
    "not enough information",
    "no relevant information",
    "not mentioned",
    "not provided",
    "unknown",
)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and English articles, collapse whitespace (SQuAD convention)."""
    text = str(text).lower()
    text = "".join(" " if ch in _PUNCT else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(gold: str | Sequence[str]) -> list[str]:
    return [gold] if isinstance(gold, str) else [str(g) for g in gold] or [""]


def exact_match(pred: str, gold: str | Sequence[str]) -> float:
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in _golds(gold)))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    if not pred_tokens and not gold_tokens:
        return 1.0
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(pred: str, gold: str | Sequence[str]) -> float:
    """Bag-of-tokens F1 over normalised answers; the best over several golds."""
    p = normalize_answer(pred).split()
    return max(_f1(p, normalize_answer(g).split()) for g in _golds(gold))


def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def anls(pred: str, gold: str | Sequence[str], threshold: float = 0.5) -> float:
    """Average normalised Levenshtein similarity for one pair (best over golds).

    Similarity 1 - dist/max_len is kept only while the normalised distance is below `threshold`.
    """
    best = 0.0
    p = " ".join(str(pred).lower().split())
    for g in _golds(gold):
        g = " ".join(g.lower().split())
        length = max(len(p), len(g))
        if length == 0:
            return 1.0
        dist = levenshtein(p, g) / length
        best = max(best, 1.0 - dist if dist < threshold else 0.0)
    return best


# ---------------------------------------------------------------- numbers
_NUM = re.compile(r"[-+−]?\(?\$?\s*\d[\d,]*(?:\.\d+)?|[-+−]?\.\d+")
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9, "b": 1e9,
          "trillion": 1e12}
_SCALE_RE = re.compile(r"^\s*(thousand|million|billion|trillion|mn|bn|k|m|b)\b", re.I)


def parse_number(text: str) -> tuple[float, bool, float] | None:
    """First number in `text` as (value, is_percent, scale). Handles $, commas, %, (negatives), scales."""
    s = str(text).strip().replace("\u2212", "-")
    m = _NUM.search(s)
    if not m:
        return None
    raw = m.group(0)
    neg = raw.lstrip().startswith(("-", "(")) or (raw.lstrip().startswith("$") and s[: m.start()].rstrip().endswith("-"))
    digits = re.sub(r"[^\d.]", "", raw)
    if digits.count(".") > 1 or digits in ("", "."):
        return None
    value = float(digits) * (-1.0 if neg else 1.0)
    rest = s[m.end():]
    is_percent = rest.lstrip().startswith("%") or rest.lstrip().lower().startswith("percent")
    scale_m = _SCALE_RE.match(rest)
    scale = _SCALE[scale_m.group(1).lower()] if scale_m and not is_percent else 1.0
    return value, is_percent, scale


def numeric_match(pred: str, gold: str, rel_tol: float = 0.01) -> bool:
    """Numbers equal within `rel_tol`, tolerant to %, $, commas, units and scale words.

    A percentage may be written as a fraction on the other side (18% vs 0.18), and a scaled value may be
    given with or without its scale (1.2 million vs 1,200,000 vs 1.2).
    """
    p, g = parse_number(pred), parse_number(gold)
    if p is None or g is None:
        return False
    pv, pp, ps = p
    gv, gp, gs = g
    pcands = {pv, pv * ps}
    gcands = {gv, gv * gs}
    if pp or gp:
        gcands |= {x / 100 for x in gcands} | {x * 100 for x in gcands}
    return any(math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-9) for a in pcands for b in gcands)


# ---------------------------------------------------------------- MMLongBench-Doc-style
_UNITS = re.compile(r"\s*(miles?|million|billion|thousand|years?|people|persons?|km|kg|cm|mm|m2|sq\.? ?ft)$")


def clean_answer(text: str) -> str:
    """Lower-case, drop a parenthesised remark, quotes, a leading $ and a trailing % or unit word."""
    s = str(text).lower().strip()
    s = re.sub(r"\s*\([^)]*\)", "", s).strip()
    s = s.strip("'\"").strip()
    s = s.lstrip("$").strip().rstrip("%").strip().rstrip(".").strip()
    s = _UNITS.sub("", s).strip()
    return s


def needs_exact(s: str) -> bool:
    """Answers where near-misses are wrong: URLs, emails, file names, dates, times, phone-like numbers."""
    return bool(
        "http://" in s
        or "https://" in s
        or s.endswith((".py", ".ipynb", ".pdf"))
        or s.startswith("page")
        or "a.m." in s
        or "p.m." in s
        or re.fullmatch(r"\d+([-\s]\d+)+", s)
        or re.fullmatch(r"\d{4}[-/]\d{1,2}([-/]\d{1,2})?", s)
        or re.fullmatch(r"[\w.%+-]+@[\w.-]+\.[a-z]{2,}", s)
    )


def is_unanswerable(text: str) -> bool:
    n = normalize_answer(text)
    return any(phrase in n for phrase in _DECLINE)


def parse_list(text: str | Sequence[str]) -> list[str]:
    """A list answer: a Python/JSON literal `['a', 'b']`, or items separated by ; , or 'and'."""
    if not isinstance(text, str):
        return [str(x) for x in text]
    s = text.strip()
    if s.startswith("[") and s.endswith("]"):
        try:
            val = ast.literal_eval(s)
            if isinstance(val, (list, tuple)):
                return [str(x) for x in val]
        except (ValueError, SyntaxError):
            s = s[1:-1]
    sep = ";" if ";" in s else ","
    parts = [p for chunk in s.split(sep) for p in re.split(r"\s+and\s+", chunk)]
    return [p.strip().strip("'\"") for p in parts if p.strip()]


def _str_score(pred: str, gold: str) -> float:
    g, p = clean_answer(gold), clean_answer(pred)
    if needs_exact(g):
        return float(g == p)
    return anls(p, g)


def _is_number(s: str) -> bool:
    return re.fullmatch(r"[-+]?\$?[\d,]*\.?\d+%?", s.strip()) is not None


def infer_format(gold: str) -> str:
    if normalize_answer(gold) == normalize_answer(NOT_ANSWERABLE):
        return "None"
    s = gold.strip()
    if s.startswith("[") and s.endswith("]"):
        return "List"
    if _is_number(clean_answer(s)) or _is_number(s):
        return "Int" if re.fullmatch(r"[-+]?[\d,]+", clean_answer(s)) else "Float"
    return "Str"


def answer_correct(pred: str | None, gold: str, answer_format: str | None = None) -> float:
    """Score in [0, 1] of `pred` against `gold` by the declared format (inferred when missing).

    Int: exact integer; Float: 1% relative tolerance (percent/fraction aware); Str: exact for
    URL/date-like answers, else ANLS; List: same length, items compared after sorting (numbers by
    tolerance, strings by the worst ANLS); None: the prediction must decline to answer.
    """
    if pred is None:
        return 0.0
    pred = str(pred).strip()
    fmt = answer_format or infer_format(gold)
    if fmt in ("Int", "Float") and parse_number(gold) is None:
        fmt = "Str"  # benchmark labels are sometimes wrong (e.g. "yes" marked Int): compare as text
    if fmt == "None" or normalize_answer(gold) == normalize_answer(NOT_ANSWERABLE):
        return 1.0 if is_unanswerable(pred) else 0.0
    if fmt == "Int":
        p, g = parse_number(clean_answer(pred)), parse_number(clean_answer(gold))
        if p is None or g is None:
            return 0.0
        return float(any(math.isclose(a, b, abs_tol=1e-9) for a in {p[0], p[0] * p[2]} for b in {g[0], g[0] * g[2]}))
    if fmt == "Float":
        return float(numeric_match(pred, gold, rel_tol=0.01))
    if fmt == "List":
        gl, pl = parse_list(gold), parse_list(pred)
        if len(gl) != len(pl) or not gl:
            return 0.0
        if all(parse_number(x) is not None and _is_number(clean_answer(x)) for x in gl):
            pv = sorted(parse_number(x)[0] if parse_number(x) else math.inf for x in pl)
            gv = sorted(parse_number(x)[0] for x in gl)
            return float(all(math.isclose(a, b, rel_tol=0.01, abs_tol=1e-9) for a, b in zip(pv, gv)))
        gs, ps = sorted(clean_answer(x) for x in gl), sorted(clean_answer(x) for x in pl)
        if needs_exact(gs[0]):
            return float(gs == ps)
        return min(anls(p, g) for p, g in zip(ps, gs))
    return _str_score(pred, gold)
