"""The trajectory viewer's data (a stratified sample of trajectories with their turns) and its vanilla JS.

The data is embedded as JSON in a `<script type="application/json">` block with `<`, `>` and `&` escaped,
so no document or model text can close the block; the script renders everything with `textContent` and
SVG attributes, never `innerHTML`, so that text is never parsed as markup. Page images are embedded thumbnails
(`thumbs.py`) stretched over the page's raw pixel box, and boxes are drawn in raw page pixels over them.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import pyarrow as pa


def viewer_data(con: duckdb.DuckDBPyConnection, limit: int = 400) -> dict[str, Any]:
    """Up to `limit` trajectories, spread over (recipe, status, verdict) so every combination shows up."""
    groups = con.execute("SELECT count(DISTINCT (recipe, status, verdict)) FROM trajectories").fetchone()[0] or 1
    per_group = max(1, limit // groups)
    trajs = con.execute(
        """
        SELECT t.traj_id, t.run_id, t.task_id, t.sample, t.recipe, t.policy, t.status, t.verdict, t.kept, t.benchmark, t.doc_type,
               t.evidence_source, t.final_answer, t.reason, t.failed_filters, t.ndcg, t.retrieval_complete, t.n_turns,
               t.retrieved_pages, t.gold_pages, k.question, k.answer
        FROM trajectories t LEFT JOIN tasks k USING (task_id)
        QUALIFY row_number() OVER (PARTITION BY t.recipe, t.status, t.verdict ORDER BY hash(t.traj_id)) <= ?
        ORDER BY t.recipe, t.status, t.verdict, t.traj_id LIMIT ?""",
        [per_group, limit],
    ).fetchall()
    cols = ["traj_id", "run_id", "task_id", "sample", "recipe", "policy", "status", "verdict", "kept", "benchmark", "doc_type",
            "evidence_source", "final_answer", "reason", "failed_filters", "ndcg", "retrieval_complete", "n_turns",
            "retrieved_pages", "gold_pages", "question", "answer"]
    items = [dict(zip(cols, r, strict=True)) for r in trajs]
    if not items:
        return {"trajectories": [], "sizes": {}, "pages": []}
    con.register("_viewer_ids", pa.table({"traj_id": [i["traj_id"] for i in items],
                                                             "run_id": [i["run_id"] for i in items]}))
    turns = con.execute(
        """SELECT u.traj_id, u.run_id, u.idx, u.role, u.assistant, u.action, u.observation_kind, u.observation_text, u.observation_images
           FROM turns u JOIN _viewer_ids USING (traj_id, run_id) ORDER BY u.traj_id, u.idx""").fetchall()
    crops = con.execute(
        """SELECT c.traj_id, c.run_id, c.turn, c.page_id, c.x1, c.y1, c.x2, c.y2
           FROM crops c JOIN _viewer_ids USING (traj_id, run_id)""").fetchall()
    con.unregister("_viewer_ids")
    by_key = {(i["traj_id"], i["run_id"]): i for i in items}
    for i in items:
        i["turns"], i["crops"] = [], []
    pages: set[str] = set()
    for traj, run, idx, role, text, action, okind, otext, obs_images in turns:
        images = []
        for raw in obs_images or []:
            im = json.loads(raw) if isinstance(raw, str) else {}
            box = (im.get("box") or {}).get("raw")
            stacked = [b.get("raw") for b in im.get("stacked") or [] if b.get("raw")]
            images.append({"page_id": im.get("page_id"), "box": box, "stacked": stacked})
            pages.add(str(im.get("page_id")))
        by_key[(traj, run)]["turns"].append({"idx": idx, "role": role, "assistant": text, "action": action,
                                             "obs_kind": okind, "obs_text": otext, "images": images})
    for traj, run, turn, page_id, x1, y1, x2, y2 in crops:
        by_key[(traj, run)]["crops"].append({"turn": turn, "page_id": page_id, "box": [x1, y1, x2, y2]})
        pages.add(page_id)
    sizes = {}
    if pages:
        con.register("_viewer_pages", pa.table({"page_id": sorted(pages)}))
        sizes = {p: [w, h] for p, w, h in con.execute(
            "SELECT page_id, width, height FROM pages JOIN _viewer_pages USING (page_id)").fetchall()}
        con.unregister("_viewer_pages")
    total = con.execute("SELECT count(*) FROM trajectories").fetchone()[0]
    return {"trajectories": items, "sizes": sizes, "total": total, "pages": sorted(pages)}


def embed_json(data: Any) -> str:
    """JSON safe inside a <script> block: no `</script>`, no HTML comment openers, no raw line separators."""
    s = json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":"))
    return (s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


VIEWER_JS = r"""
(function () {
  var data = JSON.parse(document.getElementById('viewer-data').textContent);
  var SVGNS = 'http://www.w3.org/2000/svg';
  var trajs = data.trajectories, sizes = data.sizes || {}, thumbs = data.thumbs || {}, missing = data.missing || {};
  var fRecipe = document.getElementById('f-recipe'), fStatus = document.getElementById('f-status'),
      fVerdict = document.getElementById('f-verdict'), list = document.getElementById('traj-list'),
      detail = document.getElementById('traj-detail'), count = document.getElementById('traj-count');
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fill(sel, key) {
    var seen = {};
    trajs.forEach(function (t) { seen[String(t[key])] = 1; });
    Object.keys(seen).sort().forEach(function (v) { var o = el('option', null, v); o.value = v; sel.appendChild(o); });
    sel.addEventListener('change', refresh);
  }
  function rect(svg, b, cls) {
    var r = document.createElementNS(SVGNS, 'rect');
    r.setAttribute('x', b[0]); r.setAttribute('y', b[1]);
    r.setAttribute('width', Math.max(b[2] - b[0], 1)); r.setAttribute('height', Math.max(b[3] - b[1], 1));
    r.setAttribute('class', cls);
    svg.appendChild(r);
  }
  function pageFigure(pageId, boxes, caption) {
    var fig = el('figure', 'page');
    var svg = document.createElementNS(SVGNS, 'svg');
    var img = document.createElementNS(SVGNS, 'image');
    if (thumbs[pageId]) {
      img.setAttribute('href', thumbs[pageId]);
      img.setAttribute('preserveAspectRatio', 'none');  // the thumbnail covers the page's raw pixel box exactly
      svg.appendChild(img);
    }
    var wh = sizes[pageId] || [1000, 1414];
    svg.setAttribute('viewBox', '0 0 ' + wh[0] + ' ' + wh[1]);
    img.setAttribute('width', wh[0]); img.setAttribute('height', wh[1]);
    boxes.forEach(function (b) { rect(svg, b.box, b.cls); });
    var sw = Math.max(wh[0], wh[1]) / 200;
    Array.prototype.forEach.call(svg.querySelectorAll('rect'), function (r) { r.setAttribute('stroke-width', sw); });
    fig.appendChild(svg);
    if (!thumbs[pageId]) fig.appendChild(el('p', 'missing', 'no picture: ' + (missing[pageId] || 'page image not found')));
    fig.appendChild(el('figcaption', null, caption));
    return fig;
  }
  function show(t) {
    detail.textContent = '';
    detail.appendChild(el('h3', null, t.recipe + ' · policy ' + (t.policy || 'unknown') + ' · ' + t.status + ' · verdict ' +
                                      t.verdict + ' · ' + t.traj_id));
    var meta = el('dl', 'meta');
    [['question', t.question], ['gold answer', t.answer], ['final answer', t.final_answer], ['run', t.run_id],
     ['task', t.task_id + ' (sample ' + t.sample + ')'], ['benchmark / doc type / evidence', t.benchmark + ' / ' + t.doc_type + ' / ' + t.evidence_source],
     ['gold pages', (t.gold_pages || []).join(', ')], ['retrieved pages', (t.retrieved_pages || []).join(', ')],
     ['NDCG / complete', (t.ndcg === null ? '–' : Number(t.ndcg).toFixed(3)) + ' / ' + t.retrieval_complete],
     ['failed filters', t.failed_filters], ['reason', t.reason]].forEach(function (kv) {
      if (kv[1] === null || kv[1] === undefined || kv[1] === '') return;
      meta.appendChild(el('dt', null, kv[0])); meta.appendChild(el('dd', null, kv[1]));
    });
    detail.appendChild(meta);
    t.turns.forEach(function (u) {
      var box = el('section', 'turn' + ((u.action && u.action.kind === 'invalid') || u.obs_kind === 'error' ? ' invalid' : ''));
      box.appendChild(el('h4', null, 'turn ' + u.idx + ' · ' + u.role + ' · ' + (u.action ? u.action.kind : '?')));
      box.appendChild(el('pre', 'assistant', u.assistant));
      var act = {};
      if (u.action) Object.keys(u.action).forEach(function (k) {
        var v = u.action[k];
        if (v !== '' && v !== null && !(Array.isArray(v) && v.length === 0)) act[k] = v;
      });
      box.appendChild(el('pre', 'action', 'action ' + JSON.stringify(act)));
      if (u.obs_kind) box.appendChild(el('pre', 'obs', 'observation [' + u.obs_kind + '] ' + (u.obs_text || '')));
      var figs = el('div', 'figs');
      u.images.forEach(function (im) {
        var boxes = [];
        if (im.box) boxes.push({box: im.box, cls: 'crop'});
        (im.stacked || []).forEach(function (b) { boxes.push({box: b, cls: 'stacked'}); });
        figs.appendChild(pageFigure(im.page_id, boxes, im.page_id + (im.box ? ' crop [' + im.box.map(Math.round).join(', ') + ']' : '')));
      });
      var shown = {};
      u.images.forEach(function (im) { if (im.box) shown[im.page_id] = 1; });
      var byPage = {};
      t.crops.forEach(function (c) {
        if (c.turn === u.idx && !shown[c.page_id]) (byPage[c.page_id] = byPage[c.page_id] || []).push({box: c.box, cls: 'crop'});
      });
      Object.keys(byPage).forEach(function (p) { figs.appendChild(pageFigure(p, byPage[p], p + ' crop record')); });
      if (figs.childNodes.length) box.appendChild(figs);
      detail.appendChild(box);
    });
  }
  function refresh() {
    var r = fRecipe.value, s = fStatus.value, v = fVerdict.value;
    list.textContent = '';
    var shown = trajs.filter(function (t) {
      return (!r || t.recipe === r) && (!s || t.status === s) && (!v || t.verdict === v);
    });
    shown.forEach(function (t) {
      var o = el('option', null, t.recipe + ' | ' + t.status + ' | ' + t.verdict + ' | ' + (t.question || t.task_id));
      o.value = trajs.indexOf(t);
      list.appendChild(o);
    });
    count.textContent = shown.length + ' of ' + trajs.length + ' sampled (' + data.total + ' in the database)';
    if (shown.length) { list.selectedIndex = 0; show(shown[0]); } else { detail.textContent = 'no trajectory matches'; }
  }
  list.addEventListener('change', function () { show(trajs[Number(list.value)]); });
  fill(fRecipe, 'recipe'); fill(fStatus, 'status'); fill(fVerdict, 'verdict');
  refresh();
  // report.html#traj=<traj_id> opens that trajectory (links from notes, screenshots)
  var m = /^#traj=(.+)$/.exec(location.hash || '');
  if (m) {
    var want = decodeURIComponent(m[1]);
    for (var i = 0; i < trajs.length; i++) if (trajs[i].traj_id === want) { list.value = String(i); show(trajs[i]); break; }
  }
})();
"""
