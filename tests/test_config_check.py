"""`vrag-data run` / `demo` check the whole run config before anything starts: one line naming the key and the fix,
exit 2, no Prefect server, no workspace folder."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from vrag_data.cli.main import app


def _cfg(tmp_path, **over):
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "answer": "a"}\n')
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    cfg = {"workspace": str(tmp_path / "ws"), "ingest": {"paths": [str(docs)]}, "tasks": {"file": str(qa)},
           "synth": {"recipes": ["vrag_rl"]}, "roles": {"policy": {"kind": "oracle"}, **COMPANIONS}}
    for key, value in over.items():
        section, _, field = key.partition("__")
        if field:
            cfg.setdefault(section, {})[field] = value
        elif section == "roles" and value:  # the other roles vrag_rl uses stay named (none is filled in)
            cfg[section] = {k: v for k, v in {**cfg[section], **value}.items() if v is not None}
        else:
            cfg[section] = value
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


# what the oracle's companions are, spelled out: vrag_rl uses a judge and a grounding expert
COMPANIONS = {"judge": {"kind": "rules"}, "grounding": {"same_as": "policy"}}

CASES = {
    "missing tasks file": ({"tasks__file": "/nonexistent/qa.jsonl"}, "tasks.file: /nonexistent/qa.jsonl: no such file"),
    "missing input folder": ({"ingest__paths": ["/nonexistent/pdfs"]}, "ingest.paths[0]: /nonexistent/pdfs: no such file or folder"),
    "no policy": ({"roles": {}}, "roles.policy: missing"),
    "malformed endpoint": ({"roles": {"policy": {"endpoints": [{"base_url": "localhost:8000", "model": "m"}]}}},
                           "roles.policy.endpoints[0].base_url: 'localhost:8000' is not an http(s) URL"),
    "endpoint without model name": ({"roles": {"policy": {"endpoints": [{"base_url": "http://127.0.0.1:9/v1", "model": " "}]}}},
                                    "roles.policy.endpoints[0].model: empty"),
    "key variable unset": ({"roles": {"policy": {"endpoints": [{"base_url": "http://127.0.0.1:9/v1", "model": "m",
                                                                "api_key_env": "VRAG_TEST_UNSET_KEY"}]}}},
                           "the variable VRAG_TEST_UNSET_KEY is not set"),
    "student for difficulty": ({"synth__recipes": ["unidoc_rl"]}, "role 'student' (needed by filter difficulty of recipe "
                               "unidoc_rl's SFT and RL chains) is not configured; set roles.student"),
    "no recipes": ({"synth__recipes": []}, "synth.recipes: empty"),
    "judge left out": ({"roles": {"judge": None}}, "roles.judge: recipe vrag_rl uses it (decides whether the final answer "
                       "matches the reference); configure an endpoint, `kind: rules`, or `same_as: policy`"),
    "same_as an unconfigured role": ({"roles": {"judge": {"same_as": "reader"}}},
                                     "roles.judge.same_as: 'reader' is not a configured role"),
    "the oracle cannot judge": ({"roles": {"judge": {"same_as": "policy"}}}, "the oracle knows the gold answer: it cannot judge"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_stops_before_any_work(tmp_path, monkeypatch, case):
    over, expected = CASES[case]
    monkeypatch.delenv("VRAG_TEST_UNSET_KEY", raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    cfg = _cfg(tmp_path, **over)
    for cmd in ("run", "demo"):
        res = CliRunner().invoke(app, [cmd, "--config", str(cfg)])
        lines = [x for x in res.output.splitlines() if x.strip()]
        assert res.exit_code == 2, (cmd, res.output)
        assert len(lines) == 1 and expected in lines[0] and str(cfg) in lines[0], (cmd, res.output)
        assert not (tmp_path / "ws").exists()  # no workspace, so no Prefect state either


def test_a_good_config_passes_the_check(tmp_path):
    from vrag_data.config import load_config
    from vrag_data.config_check import check_run_config

    check_run_config(load_config(_cfg(tmp_path)), "run.yaml")
