"""The student stage: an offline reader that never sees the gold, and a student endpoint's outage."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

import pytest

from tests.support.openai_server import Faults, OpenAIServer
from tests.support.synth_workspace import cli, sample_workspace
from vrag_data.cli.main import app
from vrag_data.schema.records import Page
from vrag_data.student import extractive_answer


def page(n: int, text: str) -> Page:
    return Page(page_id=f"d_{n}", doc_id="sha", stem="d", page=n, image=f"pages/d_{n}.jpg", width=10, height=10, dpi=72, text=text)


def test_extractive_student_reads_the_best_matching_line():
    pages = [page(1, "Annual report 2020\nOur people"), page(2, "Net income in 2020 was 673 million\nRevenue grew 4%")]
    # the line sharing most words with the question, its first number not in the question
    assert extractive_answer("What was the net income in 2020?", pages) == "673"
    # a second sample reads the next best line: samples can disagree, as a student's do
    assert extractive_answer("What was the net income in 2020?", pages, sample=1) != "673"
    assert extractive_answer("Who leads the company?", []) == ""


@pytest.mark.slow
def test_student_outage_stops_filter_with_one_line_and_rerun_resumes(tmp_path_factory, tmp_path):
    ws = sample_workspace(tmp_path_factory.getbasetemp())
    # a student is named at synth (its RL chain needs one); the filter's config points it at the endpoint under test
    cli("synth", "-w", ws, "--recipe", "evisrag", "--policy", "oracle", "--set", "roles.student.kind=extractive", "--limit", "2",
        "--run", "student-outage", "-q")
    with OpenAIServer(reply="<answer>1</answer>", faults=Faults(p500=1.0)) as down:
        cfg = tmp_path / "f.yaml"
        cfg.write_text(yaml.safe_dump({"roles": {"student": {"endpoints": [{"base_url": down.base_url, "model": "teacher"}],
                                                             "max_retries": 0, "timeout_s": 5}}}))
        res = CliRunner().invoke(app, ["filter", "-w", str(ws), "--run", "student-outage", "--config", str(cfg)])
    assert res.exit_code != 0
    errors = [x for x in res.output.splitlines() if x.startswith("error:")]  # (a progress line may come first)
    assert len(errors) == 1 and "student" in errors[0], res.output
    assert not (ws / "runs" / "student-outage" / "verdicts").exists()  # no verdict was made up
    with OpenAIServer(reply="<think>t</think><answer>not it</answer>") as up:
        cfg.write_text(yaml.safe_dump({"roles": {"student": {"endpoints": [{"base_url": up.base_url, "model": "teacher"}]}}}))
        out = cli("filter", "-w", ws, "--run", "student-outage", "--config", cfg)
    assert "student: model:teacher" in out


@pytest.mark.slow
def test_visor_verification_is_written_by_the_teacher_and_replaces_its_source(tmp_path_factory, tmp_path):
    from tests.support.scripted_teacher import ANSWER
    from vrag_data.schema.records import Trajectory, Verdict
    from vrag_data.store import read_records
    from vrag_data.store.run import RunDir

    ws = sample_workspace(tmp_path_factory.getbasetemp())
    cli("synth", "-w", ws, "--recipe", "visor", "--policy", "oracle", "--limit", "2", "--run", "visor-teacher-aug", "-q")
    run = ws / "runs" / "visor-teacher-aug"

    def teacher(req):  # noqa: ANN001, ANN202 - confirms the proposed answer
        import re

        m = re.search(r"Proposed answer: (.*)", json.dumps(req["messages"]).replace("\\n", "\n"))
        answer = m.group(1).split('"')[0].strip() if m else ANSWER
        return f"<think>The extra page confirms the figure already found.</think><answer>{answer}</answer>"

    with OpenAIServer(faults=Faults(p500=1.0)) as down:
        cfg = tmp_path / "f.yaml"
        cfg.write_text(yaml.safe_dump({"roles": {"policy": {"endpoints": [{"base_url": down.base_url, "model": "teacher"}], "max_retries": 0}}}))
        res = CliRunner().invoke(app, ["filter", "-w", str(ws), "--run", "visor-teacher-aug", "--config", str(cfg)])
        assert res.exit_code != 0 and res.output.startswith("error:") and "policy" in res.output, res.output
    with OpenAIServer(reply=teacher) as up:
        cfg.write_text(yaml.safe_dump({"roles": {"policy": {"endpoints": [{"base_url": up.base_url, "model": "teacher"}]}}}))
        cli("filter", "-w", ws, "--run", "visor-teacher-aug", "--config", cfg)
        asked = [r for r in up.requests if "You verify an answer" in str(r.body)]
    aug = read_records(str(run / "trajectories" / "aug-visor.parquet"), Trajectory)
    assert aug and len(asked) == len(aug)
    for a in aug:
        assert a.extra["augmented_by"] == "model:teacher"
        assert "The extra page confirms the figure already found." in a.turns[-1].assistant
        assert a.extra["verification_page"] not in a.turns[-1].assistant  # no page id leaks into the text
        assert asked[0].body["messages"][-1]["content"][0]["type"] == "image_url" or "image" in str(asked[0].body)
    verdicts = read_records(str(run / "verdicts" / "filters.parquet"), Verdict)
    replaced = {v.traj_id for v in verdicts if v.filter == "augmentation" and not v.passed}
    assert replaced == {a.extra["source_traj_id"] for a in aug}
    rd = RunDir(str(run))
    kept = [t for t in rd.trajectories() if rd.verdicts().keep(t)]
    assert kept and all(t.extra.get("augmentation") for t in kept)  # only the verified copies reach the SFT data
