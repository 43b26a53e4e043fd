"""Column names from a table's header lines (ingest/tables.py): which columns each header word names, joined top to
bottom. A word held by one column's extent names that column; a title centred over columns names them all; a word
stacked on header words below it names only their columns; unit lines ("in millions") name nothing."""

from __future__ import annotations

import re
from statistics import median

from vrag_data.ingest.table_cells import NOTE_MARK, UNIT, Line, Seg, dist, overlap


def _within(s: Seg, bands: list[tuple[float, float]]) -> int | None:
    """The column whose extent holds the whole segment (a name printed over its own column), if any."""
    return next((i for i, b in enumerate(bands) if b[0] - 2 <= s.x0 and s.x1 <= b[1] + 2), None)


def _lone_picks(s: Seg, bands: list[tuple[float, float]]) -> dict[int, Seg]:
    """The columns a header line's only segment names: all of them when it is a title centred over them ("2022"
    over four quarters and the year), else the one whose extent holds it (a left-aligned "July 2," over a column
    widened by its "$" signs), else all of them when it is roughly centred, else those it lies over."""
    mid, span = (bands[0][0] + bands[-1][1]) / 2, bands[-1][1] - bands[0][0]
    off = abs((s.x0 + s.x1) / 2 - mid)
    own = _within(s, bands)
    if off <= 0.05 * span or (own is None and off <= 0.1 * span):
        return {i: s for i in range(len(bands))}
    if own is not None:
        return {own: s}
    return {i: s for i, b in enumerate(bands) if overlap(s, b) > 0}


def _line_picks(segs: list[Seg], bands: list[tuple[float, float]], done: set[int]) -> tuple[dict[int, Seg], set[int]]:
    """The names a header line of several segments gives, and the columns it gives their own name. A segment held
    by one column's extent is that column's own name and names nothing else ("Other International" over its column
    is no part of the "Total" beside it); every other column takes its nearest remaining segment (group titles are
    centred over their columns), except a column already named by its own words on a line above with nothing over
    it here ("Total" on the top line takes no "Bonus /" from the column beside it)."""
    own = {i: s for s in segs if (i := _within(s, bands)) is not None}
    titles = [s for s in segs if all(s is not o for o in own.values())]
    picks = dict(own)
    for i, b in enumerate(bands):
        if i in picks or not titles or (i in done and not any(overlap(s, b) > 0 for s in titles)):
            continue
        picks[i] = min(titles, key=lambda s: (dist(s, b), -overlap(s, b)))
    return picks, set(own)


def _join_name(name: str, text: str) -> str:
    """A header line's text added under a name; a word hyphenated over two lines is joined ("World-" + "wide")."""
    if name.endswith(text):
        return name
    if re.search(r"[A-Za-z]-$", name) and text[:1].islower():
        return name[:-1] + text
    return f"{name} {text}".strip()


def _digits(text: str) -> bool:
    """Digits other than a footnote mark's ("amounts (1)" is words)."""
    return any(not NOTE_MARK.match(w) and re.search(r"\d", w) for w in text.split())


def _pitch(bands: list[tuple[float, float]]) -> float:
    """The median distance between neighbouring column centres (infinite for one column)."""
    mids = [(b[0] + b[1]) / 2 for b in bands]
    return median([b - a for a, b in zip(mids, mids[1:])]) if len(mids) > 1 else float("inf")


def _stacked_on(s: Seg, lower: list[list[Seg]], cols: list[dict[int, set[int]]],
                bands: list[tuple[float, float]]) -> set[int] | None:
    """The columns of the word-only header words right below a word-only segment (nearest lower line), when it is
    centred over them: "Gross" over "Unrealized" over "Losses" names the Losses column only, "Notional" over
    "amounts" the two year columns of "amounts". None (the nearest-column rule stands) otherwise."""
    if _digits(s.text):
        return None
    for segs, seg_cols in zip(lower, cols):  # a footnote mark under it ("(1)") is looked through
        under = [k for k, t in enumerate(segs) if overlap(s, (t.x0, t.x1)) > 0 and not NOTE_MARK.match(t.text)]
        if not under:
            continue
        if any(_digits(segs[k].text) for k in under):
            return None
        if any(segs[k].x1 - segs[k].x0 > 2 * (s.x1 - s.x0) + 4 for k in under):
            return None  # a title spanning columns below it ("Training-Time Correction"): no column name to stack on
        reach = 0.5 * _pitch(bands)  # not the columns the nearest-column rule spread a word below onto
        named = {i for k in under for i in seg_cols.get(k, set()) if dist(segs[k], bands[i]) <= reach}
        if not named:
            return None
        x0 = min([segs[k].x0 for k in under] + [bands[i][0] for i in named])
        x1 = max([segs[k].x1 for k in under] + [bands[i][1] for i in named])
        return named if x0 - 2 <= (s.x0 + s.x1) / 2 <= x1 + 2 else None
    return None


def _line_segs(ln: Line) -> list[Seg]:
    return [s for s in ln.cells if not UNIT.match(s.text)]


def header_names(header: list[Line], bands: list[tuple[float, float]]) -> tuple[str, list[str]]:
    """Column names from the header lines (top to bottom, joined); unit lines ("in millions") name nothing. A
    segment stacked on header words below it names only their columns (`_stacked_on`)."""
    names = [""] * len(bands)
    label_name = ""
    done: set[int] = set()  # columns named by their own words on a line above
    picks_by_line: list[dict[int, Seg]] = []
    for ln in header:
        segs = _line_segs(ln)
        if ln.label and not UNIT.match(ln.label):
            label_name = f"{label_name} {ln.label}".strip()
        if not segs:
            picks_by_line.append({})
            continue
        if len(segs) == 1:
            picks = _lone_picks(segs[0], bands)
        else:
            picks, owned = _line_picks(segs, bands, done)
            done |= owned
        picks_by_line.append(picks)
    # bottom-up: the columns each segment names, restricted where it is stacked on words below it
    cols: list[dict[int, set[int]]] = [{} for _ in header]
    for k in range(len(header) - 1, -1, -1):
        segs = _line_segs(header[k])
        for j, s in enumerate(segs):
            own = {i for i, p in picks_by_line[k].items() if p is s}
            below = _stacked_on(s, [_line_segs(h) for h in header[k + 1:]], cols[k + 1:], bands)
            cols[k][j] = own if below is None else below
    for k, ln in enumerate(header):
        for j, s in enumerate(_line_segs(ln)):
            for i in sorted(cols[k].get(j, set())):
                names[i] = _join_name(names[i], s.text)
    return label_name, names
