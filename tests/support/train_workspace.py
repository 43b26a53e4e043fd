"""A small real workspace for trainer tests: page JPEGs, Document/Page/Task records and a BM25 index."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw

from tests.support.roles import ORACLE_ROLES
from vrag_data.schema.records import ChatTurn, Document, Page, SftRecord, Task
from vrag_data.store import Workspace, write_records

DOCS = {
    "acme_report": [
        "Acme annual report 2021 overview of the company and its markets",
        "Acme revenue table: revenue in 2021 was 18.5 million dollars, up from 12.0 million in 2020",
        "Acme workforce: the company employed 420 people at the end of 2021",
    ],
    "globex_deck": [
        "Globex investor deck: strategy and product roadmap",
        "Globex market share chart: Globex holds 31 percent of the widget market",
    ],
}
QA = [  # question, answer, gold page, the search query the SFT demonstrations use
    ("What was Acme revenue in 2021?", "18.5 million dollars", "acme_report_2", "Acme revenue"),
    ("How many people did Acme employ at the end of 2021?", "420", "acme_report_3", "Acme workforce"),
    ("What market share does Globex hold in the widget market?", "31 percent", "globex_deck_2", "Globex market share"),
    ("What is the topic of the Globex investor deck?", "strategy and product roadmap", "globex_deck_1", "Globex deck"),
]


def page_image(text: str, size: tuple[int, int], seed: int) -> Image.Image:
    img = Image.new("RGB", size, (255, 255, 255))
    d = ImageDraw.Draw(img)
    d.rectangle([4, 4, size[0] - 5, 18], fill=(20 + 30 * seed % 200, 60, 120))
    d.text((6, 24), text[:18], fill=(0, 0, 0))
    d.rectangle([8, 44, 8 + 10 * (seed % 7 + 1), size[1] - 8], fill=(200, 80, 40))
    return img


def build_workspace(root: Path, size: tuple[int, int] = (112, 84)) -> tuple[Workspace, list[Task]]:
    from vrag_data.retrieve import build_index

    ws = Workspace(str(root)).makedirs()
    tasks: list[Task] = []
    n = 0
    for stem, texts in DOCS.items():
        doc_id = f"sha-{stem}"
        write_records(Path(ws.corpus_table("documents")) / f"{stem}.parquet",
                      [Document(doc_id=doc_id, stem=stem, source_path=f"{stem}.pdf", kind="pdf",
                                n_pages=len(texts), n_bytes=1000, title=stem.replace("_", " "))], Document)
        pages = []
        for i, text in enumerate(texts, start=1):
            pid = f"{stem}_{i}"
            page_image(text, size, n).save(ws.page_image(pid), quality=90)
            n += 1
            pages.append(Page(page_id=pid, doc_id=doc_id, stem=stem, page=i, image=f"pages/{pid}.jpg",
                              width=size[0], height=size[1], dpi=144, text=text, text_source="text_layer"))
        write_records(Path(ws.corpus_table("pages")) / f"{stem}.parquet", pages, Page)
    for q, a, pid, _ in QA:
        stem = pid.rsplit("_", 1)[0]
        tasks.append(Task(task_id=f"t-{pid}", question=q, answer=a, answer_format="Str", doc_ids=[f"sha-{stem}"],
                          doc_stems=[stem], evidence_pages=[pid], benchmark="test"))
    write_records(Path(ws.tasks) / "test.parquet", tasks, Task)
    build_index(ws)
    return ws, tasks


def oracle_export(ws: Workspace, out: Path, recipe: str = "vrag_rl") -> Path:
    """The real path to SFT data: oracle episodes through the recipe and environment, then `export_run`."""
    from vrag_data.config import RoleConfig, RunConfig
    from vrag_data.export.runner import export_run
    from vrag_data.recipe import resolve_recipe
    from vrag_data.synth.run import synth

    cfg = RunConfig(workspace=str(ws.root), roles={k: RoleConfig.model_validate(v) for k, v in ORACLE_ROLES.items()})
    run = synth(ws, cfg, resolve_recipe(recipe, cfg), progress=False)
    export_run(ws, run.run_id, ["llamafactory", "hf"], out)
    return out


def write_sft_export(ws: Workspace, out: Path, n: int = 4) -> list[SftRecord]:
    """An SFT export in the LLaMA-Factory sharegpt layout (messages + images relative to the folder)."""
    (out / "images").mkdir(parents=True, exist_ok=True)
    records = []
    for i, (q, a, pid, query) in enumerate((QA * 2)[:n]):
        img = Image.open(ws.page_image(pid))
        name = f"images/{pid}.jpg"
        img.save(out / name)
        records.append(SftRecord(
            id=f"r{i}", recipe="vrag_rl", task_id=f"t-{pid}", traj_id=f"tr{i}",
            messages=[
                ChatTurn(role="system", content="Use <search> to find pages and <answer> to answer."),
                ChatTurn(role="user", content=f"Question: {q}"),
                ChatTurn(role="assistant", content=f"<think>I should search.</think><search>{query}</search>"),
                ChatTurn(role="user", content="<image>\nHere is the page you found."),
                ChatTurn(role="assistant", content=f"<think>The page says it.</think><answer>{a}</answer>"),
            ],
            images=[name],
        ))
    rows = [{"messages": [m.model_dump() for m in r.messages], "images": r.images} for r in records]
    (out / "vrag_sft.json").write_text(json.dumps(rows, indent=1))
    (out / "dataset_info.json").write_text(json.dumps({"vrag_sft": {
        "file_name": "vrag_sft.json", "formatting": "sharegpt",
        "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                 "assistant_tag": "assistant", "system_tag": "system"}}}))
    return records
