"""Geometry at the model boundary: resizes, coordinate spaces, crops."""

from __future__ import annotations

import ast
import importlib.util
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vrag_data.env.geometry import (
    QWEN_MAX_PIXELS,
    QWEN_MIN_PIXELS,
    VRAG_MAX_PIXELS,
    VRAG_MIN_PIXELS,
    ResizeRule,
    box_to_model,
    crop_box,
    fit_pixels,
    from_raw,
    smart_resize,
    sqrt_budget_resize,
    stack_layout,
    to_raw,
)
from vrag_data.schema.geometry_types import Box


def _reference_smart_resize():
    """`qwen_vl_utils.smart_resize` as installed. The package imports torchvision at module level, which is
    not installed here (it would pull another torch build), so the functions are compiled from the installed
    source file itself rather than imported; the code under test is never copied."""
    spec = importlib.util.find_spec("qwen_vl_utils")
    if spec is None or spec.origin is None:
        pytest.skip("qwen-vl-utils is not installed (dev extra)")
    src = Path(spec.origin).with_name("vision_process.py").read_text()
    tree = ast.parse(src)
    keep = {"round_by_factor", "ceil_by_factor", "floor_by_factor", "smart_resize"}
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in keep]
    nodes += [
        n
        for n in tree.body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") in {"MAX_RATIO", "IMAGE_MIN_TOKEN_NUM", "IMAGE_MAX_TOKEN_NUM"} for t in n.targets)
    ]
    assert len([n for n in nodes if isinstance(n, ast.FunctionDef)]) == 4, "qwen_vl_utils changed shape"
    ns: dict = {"math": math}
    exec("from typing import Optional, Tuple", ns)
    exec(compile(ast.Module(body=nodes, type_ignores=[]), spec.origin, "exec"), ns)
    return ns["smart_resize"]


REF = None


def ref(*args):
    global REF
    if REF is None:
        REF = _reference_smart_resize()
    return REF(*args)


BUDGETS = [(QWEN_MIN_PIXELS, QWEN_MAX_PIXELS), (VRAG_MIN_PIXELS, VRAG_MAX_PIXELS), (3136, 12845056), (200704, 401408)]


def _agree(h: int, w: int, lo: int, hi: int, factor: int = 28) -> None:
    try:
        want = ref(h, w, factor, lo, hi)
    except ValueError:
        with pytest.raises(ValueError):
            smart_resize(h, w, factor, lo, hi)
        return
    assert smart_resize(h, w, factor, lo, hi) == want, (h, w, lo, hi)


def test_smart_resize_agrees_with_qwen_vl_utils_on_a_grid():
    n = 0
    for lo, hi in BUDGETS:
        for h in list(range(1, 4200, 61)) + [27, 28, 29, 55, 56, 57, 1584, 2200, 3508]:
            for w in list(range(1, 4200, 73)) + [14, 28, 42, 1224, 1700, 2480]:
                _agree(h, w, lo, hi)
                n += 1
    assert n > 19_000


@settings(max_examples=1500, deadline=None)
@given(
    h=st.integers(1, 30_000),
    w=st.integers(1, 30_000),
    budget=st.sampled_from(BUDGETS),
    factor=st.sampled_from([28, 32, 14]),
)
@pytest.mark.slow
def test_smart_resize_agrees_with_qwen_vl_utils_random(h, w, budget, factor):
    _agree(h, w, budget[0], budget[1], factor)


def test_smart_resize_rejects_extreme_aspect_ratio_like_the_reference():
    with pytest.raises(ValueError, match="aspect ratio"):
        smart_resize(10, 2001)
    with pytest.raises(ValueError, match="aspect ratio"):
        ref(10, 2001, 28, QWEN_MIN_PIXELS, QWEN_MAX_PIXELS)
    assert smart_resize(10, 2000) == ref(10, 2000, 28, QWEN_MIN_PIXELS, QWEN_MAX_PIXELS)
    with pytest.raises(ValueError):
        smart_resize(0, 100)


def test_smart_resize_known_values():
    # a US-letter page at 144 dpi under Qwen2.5-VL's default budget and VRAG-RL's budget
    assert smart_resize(1584, 1224) == (1120, 868)
    assert smart_resize(1584, 1224, 28, VRAG_MIN_PIXELS, VRAG_MAX_PIXELS) == (700, 532)


def test_sqrt_budget_resize_follows_vrag_rule():
    # 1224x1584 = 1.94 MP > 401408: scale by sqrt(401408 / (1224*1584)) and truncate
    f = math.sqrt(VRAG_MAX_PIXELS / (1224 * 1584))
    assert sqrt_budget_resize(1584, 1224) == (int(1584 * f), int(1224 * f))
    # a small crop is grown to the minimum budget
    h, w = sqrt_budget_resize(100, 200)
    g = math.sqrt(VRAG_MIN_PIXELS / 20000)
    assert (h, w) == (int(100 * g), int(200 * g))
    # inside the budget: untouched
    assert sqrt_budget_resize(500, 600) == (500, 600)
    assert sqrt_budget_resize(500, 600, None, None) == (500, 600)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(h=st.integers(1, 20_000), w=st.integers(1, 20_000))
def test_sqrt_budget_resize_properties(h, w):
    rh, rw = sqrt_budget_resize(h, w)
    assert rh >= 1 and rw >= 1
    if h * w > VRAG_MAX_PIXELS:
        assert rh * rw <= VRAG_MAX_PIXELS
    if VRAG_MIN_PIXELS <= h * w <= VRAG_MAX_PIXELS:
        assert (rh, rw) == (h, w)
    if min(h, w) > 50:  # aspect ratio kept up to truncation
        assert abs(rh / rw - h / w) <= 2.0 / min(rh, rw) * max(1, h / w)


def test_resize_rule_display_sizes():
    assert ResizeRule("smart").display_size(1224, 1584) == (868, 1120)
    w, h = ResizeRule("sqrt_budget", VRAG_MIN_PIXELS, VRAG_MAX_PIXELS).display_size(1224, 1584)
    assert w % 28 == 0 and h % 28 == 0
    assert abs(w * h - VRAG_MAX_PIXELS) < 0.1 * VRAG_MAX_PIXELS
    assert ResizeRule("none").display_size(1224, 1584) == (1232, 1596)


def test_fit_pixels_stays_in_budget_and_handles_slivers():
    w, h = fit_pixels(3000, 4000, VRAG_MIN_PIXELS, VRAG_MAX_PIXELS)
    assert w * h <= VRAG_MAX_PIXELS and w % 28 == 0 and h % 28 == 0
    w, h = fit_pixels(30, 9000, None, 100_000)  # aspect ratio 300: smart_resize refuses, budget rule applies
    assert w * h <= 100_000 and w >= 1
    assert fit_pixels(3000, 4000, None, VRAG_MAX_PIXELS, "sqrt_budget") == sqrt_budget_resize(4000, 3000, None, VRAG_MAX_PIXELS)[::-1]


@settings(max_examples=300, deadline=None)
@given(
    rw=st.integers(100, 5000),
    rh=st.integers(100, 5000),
    fx=st.floats(0, 0.9),
    fy=st.floats(0, 0.9),
    fw=st.floats(0.05, 0.1),
    fh=st.floats(0.05, 0.1),
)
@pytest.mark.slow
def test_conversions_round_trip(rw, rh, fx, fy, fw, fh):
    raw = (fx * rw, fy * rh, (fx + fw) * rw, (fy + fh) * rh)
    # 0-1000 space: at most half a permille of the side
    back = to_raw(from_raw(raw, "norm1000", (rw, rh)), "qwen3-vl", (rw, rh))
    for a, b, side in zip(raw, back, (rw, rh, rw, rh)):
        assert abs(a - b) <= side / 2000 + 1e-9
    disp = ResizeRule().display_size(rw, rh)
    back = to_raw(from_raw(raw, "qwen2.5-vl", (rw, rh), disp), "qwen2.5-vl", (rw, rh), disp)
    for a, b, side, dside in zip(raw, back, (rw, rh, rw, rh), disp * 2):
        assert abs(a - b) <= side / dside / 2 + 1e-9
    assert to_raw(raw, "raw", (rw, rh)) == raw


def test_to_raw_qwen25_scales_by_display_size():
    assert to_raw([100, 50, 200, 150], "qwen2.5-vl", (2000, 1000), (1000, 500)) == (200, 100, 400, 300)
    assert to_raw([100, 50, 200, 150], "norm1000", (2000, 1000)) == (200, 50, 400, 150)
    with pytest.raises(ValueError):
        to_raw([0, 0, 1, 1], "qwen2.5-vl", (10, 10))
    with pytest.raises(ValueError):
        to_raw([0, 0, 1, 1], "pixels", (10, 10))


def test_box_to_model():
    box = Box.from_raw((122.4, 158.4, 612, 792), 1224, 1584)
    assert box_to_model(box, "qwen3-vl", (1224, 1584)) == [100, 100, 500, 500]
    px = box_to_model(box, "qwen2.5-vl", (1224, 1584))
    assert px == [87, 112, 434, 560]  # display 868x1120


def test_crop_box_maps_expands_and_clamps():
    r = crop_box([100, 100, 300, 200], "norm1000", (1000, 2000))
    assert r.ok and r.reason == ""
    assert r.target.raw == (100, 200, 300, 400)
    assert r.region.raw == (72, 172, 328, 428)  # 28 px margin on each side
    assert r.region.norm == (72, 86, 328, 214)
    edge = crop_box([0, 0, 100, 100], "norm1000", (1000, 1000))
    assert edge.region.raw == (0, 0, 128, 128)  # clamped at the page border
    big = crop_box([-50, -50, 5000, 5000], "raw", (800, 600))
    assert big.ok and big.region.raw == (0, 0, 800, 600) and big.target.raw == (0, 0, 800, 600)
    px = crop_box([434, 560, 868, 1120], "qwen2.5-vl", (1224, 1584), (868, 1120), margin=0)
    assert px.ok and px.region.raw == (612, 792, 1224, 1584)


@pytest.mark.parametrize(
    "box,needle",
    [
        ([300, 100, 100, 200], "x2 > x1"),
        ([100, 100, 100, 200], "x2 > x1"),
        ([100, 300, 200, 300], "y2 > y1"),
        ([float("nan"), 0, 10, 10], "NaN"),
        ([0, 0, float("inf"), 10], "NaN or infinite"),
        ([100, 100, 105, 400], "smaller than 28"),
        ([1000, 0, 1200, 100], "outside"),
        ([-200, -200, -100, -100], "outside"),
        ([1, 2, 3], "4 numbers"),
        (["a", 1, 2, 3], "four numbers"),
    ],
)
def test_crop_box_rejects_with_reason(box, needle):
    r = crop_box(box, "norm1000", (1000, 1000))
    assert not r.ok and r.region is None
    assert needle in r.reason


def test_crop_box_rejects_missing_display_size_and_unknown_space():
    assert "display size" in crop_box([0, 0, 100, 100], "qwen2.5-vl", (1000, 1000)).reason
    assert "unknown" in crop_box([0, 0, 100, 100], "pixels", (1000, 1000)).reason


@settings(max_examples=800, deadline=None)
@given(
    box=st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6)), min_size=0, max_size=6),
    space=st.sampled_from(["qwen2.5-vl", "qwen3-vl", "norm1000", "raw"]),
    w=st.integers(1, 4000),
    h=st.integers(1, 4000),
)
@pytest.mark.slow
def test_crop_box_never_raises_and_ok_boxes_are_inside(box, space, w, h):
    r = crop_box(box, space, (w, h), (868, 1120))
    if r.ok:
        x1, y1, x2, y2 = r.region.raw
        assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
        t = r.target.raw
        assert x1 <= t[0] and y1 <= t[1] and t[2] <= x2 and t[3] <= y2
        assert t[2] - t[0] >= 28 and t[3] - t[1] >= 28
    else:
        assert r.reason


def test_stack_layout():
    (w, h), offsets = stack_layout([(100, 50), (300, 20), (10, 10)])
    assert (w, h) == (300, 80)
    assert offsets == [(0, 0), (0, 50), (0, 70)]
    assert stack_layout([]) == ((0, 0), [])
