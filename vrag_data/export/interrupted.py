"""An export killed outright (kill -9, power loss) while it was written over an earlier one leaves that earlier
export set aside in `<out>/.previous-export/` and its own files half written. The next start of any stage puts the
earlier export back (`restore_interrupted_exports`) and says so in one line, so the folder never stays empty or
half written until the next export. A folder an export is writing right now (its lock is held) is left alone."""

from __future__ import annotations

import json
from pathlib import Path

from vrag_data.errors import VragError
from vrag_data.export.runner import ASIDE, Previous
from vrag_data.report.sources import EXPORT_REGISTRY
from vrag_data.store import Workspace
from vrag_data.store.run import ExportLock


def _candidates(ws: Workspace) -> list[Path]:
    """Export folders that hold a set-aside export: under the workspace's exports/ (two levels), and every folder
    an export outside it registered."""
    exports = Path(ws.exports.removeprefix("file://"))
    if not exports.is_dir():
        return []
    found = {p.parent for pattern in (f"*/{ASIDE}", f"*/*/{ASIDE}") for p in exports.glob(pattern) if p.is_dir()}
    reg = exports / EXPORT_REGISTRY
    if reg.is_file():
        for line in reg.read_text(errors="replace").splitlines():
            try:
                out = Path(json.loads(line)["out_dir"])
            except (ValueError, KeyError, TypeError):
                continue
            if (out / ASIDE).is_dir():
                found.add(out)
    return sorted(found)


def restore_interrupted_exports(ws: Workspace, also: list[str] | None = None) -> list[str]:
    """Put back every earlier export an interrupted export had set aside (in the workspace's export folders, and in
    the folders `also` names: an export's --out); one line per folder restored."""
    if not ws.is_local:
        return []
    lines = []
    folders = {*_candidates(ws), *(Path(f) for f in also or () if (Path(f) / ASIDE).is_dir())}
    for out in sorted(folders):
        try:
            with ExportLock(out):
                aside = out / ASIDE
                if not aside.is_dir():  # the export that held the lock has finished meanwhile
                    continue
                Previous(out, aside, set()).restore(remove_new_images=False)
                for tmp in (out / "images").glob(".*.tmp"):  # the killed export's half-written images
                    tmp.unlink(missing_ok=True)
        except VragError:  # an export is writing this folder now: the set-aside export is its own
            continue
        except OSError as err:
            raise VragError(f"{out}: an export into this folder was interrupted and the earlier export it was replacing "
                            f"(in {out / ASIDE}) could not be put back ({err.strerror or err}); move its files back "
                            "into the folder by hand, or re-run the export") from None
        lines.append(interrupted_line(out))
    return lines


def interrupted_line(out: Path) -> str:
    return (f"{out}: an export into this folder was interrupted before it finished; its files were removed and the "
            "earlier export it was replacing is back in place")
