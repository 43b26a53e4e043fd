"""A small workspace with page JPEGs, pages, tasks, trajectories and verdicts for the export tests."""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

from vrag_data.schema.geometry_types import Box
from vrag_data.schema.records import (
    Action,
    CropRecord,
    EvidenceBox,
    ImageRef,
    Message,
    Observation,
    Page,
    Provenance,
    Task,
    Trajectory,
    Turn,
    Verdict,
)
from vrag_data.filters import save_verdicts
from vrag_data.store import Workspace, write_records

W, H = 1000, 1400
RECIPES = ("vrag_rl", "evisrag")  # the recipes the fixture run's trajectories name (it has no manifest)


def run_recipes() -> list:
    """What an entry point hands the export for the fixture run: its recipes, resolved once."""
    from vrag_data.recipe import get_recipe

    return [get_recipe(name) for name in RECIPES]

SYSTEM = "You answer questions about documents. Use <search>, <bbox> and <answer>."


def page_image(path: Path, label: str) -> None:
    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    d.rectangle((100, 280, 500, 840), outline="black", width=5)
    d.text((120, 300), label, fill="black")
    img.save(path, format="JPEG", quality=85)


def prov(policy: str = "oracle") -> Provenance:
    return Provenance(recipe="vrag_rl", policy=policy, models={"policy": "oracle"}, config_hash="cfg123", code_version="0.1.0+test")


def task(tid: str, stem: str, page: int, answer: str, benchmark: str = "", text: str = "") -> Task:
    pid = f"{stem}_{page}"
    return Task(
        task_id=tid,
        question=f"What is on page {page} of {stem}?",
        answer=answer,
        answer_format="Str",
        doc_ids=[f"sha_{stem}"],
        doc_stems=[stem],
        evidence_pages=[pid],
        evidence_boxes=[EvidenceBox(page_id=pid, box=Box.from_norm((100, 200, 500, 600), W, H), text=text)],
        benchmark=benchmark,
    )


def user(question: str, images: list[ImageRef] | None = None) -> list[Message]:
    return [Message(role="system", text=SYSTEM), Message(role="user", text=question, images=images or [])]


def traj(tid: str, t: Task, turns: list[Turn], recipe: str = "vrag_rl", prompt: list[Message] | None = None, **kw) -> Trajectory:
    sample = kw.pop("sample", int(tid.removeprefix("tr")) if tid.removeprefix("tr").isdigit() else 0)  # one episode each
    return Trajectory(
        traj_id=tid, run_id="r1", task_id=t.task_id, sample=sample, recipe=recipe,
        prompt=prompt if prompt is not None else user(t.question), turns=turns, provenance=prov(), **kw,
    )


def search_turn(idx: int, page_id: str, text: str = "found a page") -> Turn:
    return Turn(
        idx=idx,
        assistant=f"<think>look it up</think><search>query {idx}</search>",
        action=Action(kind="search", query=f"query {idx}"),
        observation=Observation(kind="search", text=text, images=[ImageRef(page_id=page_id)]),
    )


def answer_turn(idx: int, answer: str, evidence: list[str] | None = None) -> Turn:
    return Turn(idx=idx, assistant=f"<think>done</think><answer>{answer}</answer>",
                action=Action(kind="answer", answer=answer, evidence=evidence or []))


def build_workspace(root: Path, with_verdicts: bool = True) -> Workspace:
    ws = Workspace(str(root)).makedirs()
    pages = []
    for stem, n in (("docA", 3), ("docB", 2)):
        for p in range(1, n + 1):
            page_image(root / "pages" / f"{stem}_{p}.jpg", f"{stem} page {p}")
            pages.append(Page(page_id=f"{stem}_{p}", doc_id=f"sha_{stem}", stem=stem, page=p,
                              image=f"pages/{stem}_{p}.jpg", width=W, height=H, dpi=144))
    write_records(ws.path("corpus", "pages", "all.parquet"), pages, Page)

    t1 = task("t1", "docA", 2, "42", benchmark="slidevqa", text="the total is 42")
    t2 = task("t2", "docB", 1, "blue")
    t4 = task("t4", "docA", 9, "nine")  # its page image does not exist
    write_records(ws.path("tasks", "tasks.parquet"), [t1, t2, t4], Task)

    norm_box = [100, 200, 500, 600]
    crop_turn = Turn(
        idx=1,
        assistant=f"<think>zoom on the table</think><bbox>{norm_box}</bbox>",
        action=Action(kind="crop", boxes=[list(map(float, norm_box))], page_ids=["docA_2"]),
        observation=Observation(kind="crop", text="", images=[ImageRef(page_id="docA_2", box=Box.from_norm((100, 200, 500, 600), W, H))]),
    )
    tr1 = traj("tr1", t1, [search_turn(0, "docA_2"), crop_turn, answer_turn(2, "42")],
               crops=[CropRecord(turn=1, page_id="docA_2", box=Box.from_norm((100, 200, 500, 600), W, H))],
               extra={"coord_space": "qwen3-vl"})
    # page text with a literal <image> token; two assistant turns in a row (no observation in between)
    think_only = Turn(idx=1, assistant="<think>still thinking</think>", action=Action(kind="think"))
    # (the answer turn has no <think> of its own: the merged reply is one think and one action, a clean sample)
    bare_answer = Turn(idx=2, assistant="<answer>blue</answer>", action=Action(kind="answer", answer="blue"))
    tr2 = traj("tr2", t2, [search_turn(0, "docB_1", text="OCR says: <image> logo here"), think_only, bare_answer])
    tr3 = traj("tr3", t1, [search_turn(0, "docA_1"), answer_turn(1, "41")])  # fails its verdict
    tr4 = traj("tr4", t4, [search_turn(0, "docA_9"), answer_turn(1, "nine")])  # missing image
    orphan = task("t_missing", "docA", 1, "x")
    tr5 = traj("tr5", orphan, [answer_turn(0, "x")], prompt=[Message(role="system", text=SYSTEM)])  # no user turn
    ev_imgs = [ImageRef(page_id=p) for p in ("docB_1", "docB_2", "docA_1")]
    lines = ["[1]: the car is blue", "[2]: no relevant information", "[3]: no relevant information"]
    four_tags = Turn(idx=0, assistant=f"<observe>image 1 shows a car</observe><evidence>{chr(10).join(lines)}</evidence>"
                                      "<think>image 1 says so</think><answer>blue</answer>",
                     action=Action(kind="answer", answer="blue", evidence=lines))
    tr6 = traj("tr6", t2, [four_tags],  # EVisRAG's prompt is one user message (its grammar has no <search> to name)
               recipe="evisrag", prompt=user("[1] <image> [2] <image> [3] <image> Which colour is the car?", ev_imgs)[1:])
    tr7 = traj("tr7", t2, [search_turn(0, "docB_2")], status="max_turns")
    trajs = [tr1, tr2, tr3, tr4, tr5, tr6, tr7]
    write_records(ws.path("runs", "r1", "trajectories", "part-0.parquet"), trajs[:4], Trajectory)
    write_records(ws.path("runs", "r1", "trajectories", "part-1.parquet"), trajs[4:], Trajectory)
    if with_verdicts:
        verdicts = [
            Verdict(run_id="r1", traj_id=t.traj_id, task_id=t.task_id, filter="correctness", passed=t.traj_id not in ("tr3", "tr7"))
            for t in trajs
        ] + [Verdict(run_id="r1", traj_id="tr1", task_id="t1", filter="structure", passed=True)]
        save_verdicts(ws.path("runs", "r1"), verdicts, "v")
    return ws
