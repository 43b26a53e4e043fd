"""The headline command's four first errors, as a user meets them: one `vrag-data up`, then Prefect's own CLI
`prefect deployment run vrag-data/synth ... --watch` four times, each with one thing wrong. The first line of `--watch`
that speaks of a failure must be the cause, in words that name the fix:

1. a key exported after `up` (the run's shell has it, the `up` server that runs the flow does not);
2. a question writer that answers HTTP 401 (a real server on 127.0.0.1 that lists its models and refuses chats);
3. an input named `.pdf` that is a text file;
4. a judge that verifies questions from page images, served by a text-only model.

Each run fails in seconds to about a minute (the 401 one ingests a 5-page PDF first), with the key never printed."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.openai_server import OpenAIServer
from tests.flows.test_deployment_first_error import _RefusingWriter
from tests.flows.test_headline_command import (
    BIN,
    CLEAN_ENV,
    CORPUS,
    PdfTeacher,
    _free_port,
    _reason_comes_first,
    readme_run_yaml,
)

PDF = "PEPSICO_2023_8K_dated-2023-05-05.pdf"  # 5 pages
KEY_VAR, KEY = "VRAG_HEADLINE_KEY", "k3y-after-up-9f2c"
TEXT_ONLY = "Qwen2.5-7B-Instruct"


def _ep(url: str, model: str = "teacher", **extra: str) -> dict[str, str]:
    return {"base_url": url, "model": model, **extra}


@pytest.mark.soak
@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_first_error_line_of_four_broken_runs_through_prefects_cli(tmp_path):
    if not (CORPUS / PDF).is_file():
        pytest.skip(f"the shared corpus is not at {CORPUS}; it is research-only and not in the repo")
    (tmp_path / "pdfs").mkdir()
    shutil.copy(CORPUS / PDF, tmp_path / "pdfs" / PDF)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "minutes.pdf").write_text("meeting notes, plain text\n")
    (tmp_path / "run.yaml").write_text(readme_run_yaml())
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    vrag, prefect = str(BIN / "vrag-data"), str(BIN / "prefect")
    # the shell the user types `prefect deployment run` in: the key was exported there after `up` started
    env = {**CLEAN_ENV, "PREFECT_API_URL": api, "COLUMNS": "300", KEY_VAR: KEY}
    up_env = {k: v for k, v in CLEAN_ENV.items() if k != KEY_VAR}

    def deployment_run(ws: str, endpoints: dict[str, dict[str, str]], input: str = "pdfs") -> str:
        params = ("config=run.yaml", f"input={input}", f"workspace={ws}", "recipe=visor", "questions=3", "samples=1",
                  f"endpoints={json.dumps(endpoints)}")
        cmd = [prefect, "deployment", "run", "vrag-data/synth", *(x for p in params for x in ("--param", p)), "--watch"]
        res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        out = res.stdout + res.stderr
        assert res.returncode != 0, out[-3000:]
        assert KEY not in out
        return out

    refusing = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingWriter)
    refusing.chats = 0  # type: ignore[attr-defined]
    threading.Thread(target=refusing.serve_forever, daemon=True).start()
    writer_url = f"http://127.0.0.1:{refusing.server_address[1]}/v1"
    up = subprocess.run([vrag, "up", "-w", "ws", "--port", str(port)], cwd=tmp_path, env=up_env, capture_output=True,
                        text=True, timeout=400)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        with OpenAIServer(reply=PdfTeacher(), models=["teacher", TEXT_ONLY], api_key=KEY) as srv:
            # 1. the key exists only in the shell that runs the deployment, not in the `up` server's environment
            keyed = _ep(srv.base_url, api_key_env=KEY_VAR)
            out = deployment_run("ws-key", {"policy": keyed, "question_writer": keyed, "judge": keyed})
            _reason_comes_first(out, f"the variable {KEY_VAR} is not set where this runs")
            flat = " ".join(out.split())
            assert "not in the environment of the `vrag-data up` server (started" in flat, out[-3000:]
            assert "vrag-data down` then `vrag-data up` in a shell that has it" in flat
            assert "no Prefect Secret block 'vrag-headline-key' (create it: " in flat, out[-3000:]

            # 2. a question writer that answers 401 to every chat request (its model list is open)
            plain = OpenAIServer(reply=PdfTeacher(), models=["teacher", TEXT_ONLY])
            with plain:
                ok = _ep(plain.base_url)
                out = deployment_run("ws-401", {"policy": ok, "question_writer": _ep(writer_url, "writer"), "judge": ok})
                _reason_comes_first(out, f"question writer: {writer_url} answered HTTP 401 Unauthorized to POST "
                                         "/chat/completions")
                assert "check roles.question_writer.endpoints[0].api_key_env" in " ".join(out.split())
                assert 1 <= refusing.chats <= 20  # type: ignore[attr-defined]  # stopped at the refusal

                # 3. a folder whose only `.pdf` is a text file
                out = deployment_run("ws-text", {"policy": ok, "question_writer": ok, "judge": ok}, input="notes")
                _reason_comes_first(out, "ingest: nothing could be ingested")
                assert "minutes.pdf: not a PDF (file starts with b'meeting '); convert it or remove it from the inputs" \
                    in " ".join(out.split())

                # 4. the judge verifies generated questions from page images; this one is a text-only model
                out = deployment_run("ws-judge", {"policy": ok, "question_writer": ok,
                                                  "judge": _ep(plain.base_url, TEXT_ONLY)})
                _reason_comes_first(out, f"roles.judge: model {TEXT_ONLY} is not a vision model")
                assert "roles.judge.vision: true" in " ".join(out.split())
        # the judge was refused before any work; the text file left no page image
        assert not (tmp_path / "ws-judge" / "corpus").exists()
        assert not list((tmp_path / "ws-text").rglob("*.jpg"))
    finally:
        refusing.shutdown()
        down = subprocess.run([vrag, "down", "-w", "ws"], cwd=tmp_path, env=CLEAN_ENV, capture_output=True, text=True,
                              timeout=120)
    assert down.returncode == 0 and "stopped 2 process(es)" in down.stderr, down.stderr
    assert not Path(tmp_path / "ws" / ".prefect" / "up.json").exists()
