"""Pure parts of the Prefect layer (no server): document shards, cache keys, runner choice, config checks."""

from __future__ import annotations

import pytest

from tests.support.roles import ORACLE_ROLES
from flows.keys import files_digest, stage_key, tree_fingerprint
from flows.runner import describe_runner, make_task_runner, resolve_runner
from flows.stages import doc_shards
from vrag_data.config import ConfigError, RunnerConfig, parse_config
from vrag_data.errors import VragError


def test_doc_shards_keep_equal_stems_together_and_respect_the_size():
    files = [f"/a/{n}.pdf" for n in "edcba"] + ["/b/c.pdf", "/b/x.png"]
    shards = doc_shards(files, 2)
    assert sorted(f for s in shards for f in s) == sorted(files)  # nothing lost, nothing doubled
    together = [s for s in shards if "/a/c.pdf" in s][0]
    assert "/b/c.pdf" in together
    assert all(len(s) <= 2 for s in shards)
    assert len(doc_shards(files, 100)) == 1 and len(doc_shards(files, 1)) == 6  # 7 files, 6 stems


def test_stage_keys_follow_content_and_config(tmp_path):
    a, b = tmp_path / "a.pdf", tmp_path / "b.pdf"
    a.write_bytes(b"one")
    b.write_bytes(b"two")
    k = stage_key("ingest", files_digest([str(a), str(b)]), {"dpi": 144})
    assert k == stage_key("ingest", files_digest([str(b), str(a)]), {"dpi": 144})  # order-free
    assert k != stage_key("ingest", files_digest([str(a), str(b)]), {"dpi": 200})
    b.write_bytes(b"changed")
    assert k != stage_key("ingest", files_digest([str(a), str(b)]), {"dpi": 144})
    assert k.startswith("ingest-")


def test_tree_fingerprint_sees_only_matching_files(tmp_path):
    d = tmp_path / "trajectories"
    d.mkdir()
    (d / "part-000000.parquet").write_bytes(b"x")
    before = tree_fingerprint(str(d), pattern="part-*.parquet")
    (d / "aug-visor.parquet").write_bytes(b"y")  # written by the filter stage itself
    (d / ".tmp-1-part-000001.parquet").write_bytes(b"z")  # half-written
    assert tree_fingerprint(str(d), pattern="part-*.parquet") == before
    (d / "part-000001.parquet").write_bytes(b"w")
    assert tree_fingerprint(str(d), pattern="part-*.parquet") != before
    assert tree_fingerprint(str(tmp_path / "missing")) == tree_fingerprint(str(tmp_path / "missing"))


def test_runner_choice():
    cfg = RunnerConfig()
    assert resolve_runner(cfg, None).kind == "local" and resolve_runner(cfg, "ray").kind == "ray"
    with pytest.raises(VragError, match="--runner 'dask'"):
        resolve_runner(cfg, "dask")
    assert "local threads" in describe_runner(cfg)
    assert describe_runner(RunnerConfig(kind="ray", ray_address="ray://head:10001")) == "Ray at ray://head:10001"
    assert type(make_task_runner(cfg)).__name__ == "ThreadPoolTaskRunner"


def test_local_ray_settings_stay_on_this_machine():
    pytest.importorskip("prefect_ray")
    from flows.runner import ray_init_kwargs

    kw = ray_init_kwargs(RunnerConfig(kind="ray", max_concurrency=3))
    assert kw["_node_ip_address"] == "127.0.0.1" and kw["include_dashboard"] is False and kw["num_cpus"] == 3
    env = kw["runtime_env"]["env_vars"]
    assert env["RAY_USAGE_STATS_ENABLED"] == "0" and env["HF_HUB_OFFLINE"] == "1"
    remote = ray_init_kwargs(RunnerConfig(kind="ray", ray_address="ray://head:10001"))
    assert "num_cpus" not in remote and "PREFECT_HOME" not in remote["runtime_env"]["env_vars"]


def test_runner_config_is_checked():
    with pytest.raises(ConfigError, match="runner.retries"):
        parse_config({"runner": {"retries": -1}})
    with pytest.raises(ConfigError, match="runner.kind"):
        parse_config({"runner": {"kind": "dask"}})


def test_a_recipe_whose_filters_need_a_student_fails_before_any_work(tmp_path):
    import yaml

    from flows.flows import load
    from vrag_data.config import ConfigError

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"workspace": str(tmp_path / "ws"), "synth": {"recipes": ["unidoc_rl"]},
                                   "roles": ORACLE_ROLES}))
    with pytest.raises(ConfigError, match=r"role 'student' \(needed by filter difficulty of recipe unidoc_rl's SFT and RL "
                                          r"chains\) is not configured; set roles\.student"):
        load(str(cfg))
    assert not (tmp_path / "ws").exists()  # nothing was created


def test_every_role_setting_can_be_a_deployment_parameter():
    """`--param endpoints=...` takes what `roles.<role>` can hold besides the endpoint (the vision error's own fix,
    `vision: true`, timeouts, sampling): Prefect validates the parameter against the flow's signature, and the role
    the run gets carries each setting given."""
    from flows.flows import _merge, _overrides, synth

    ep = {"base_url": "http://127.0.0.1:8000/v1", "model": "served-alias", "vision": True, "timeout_s": 30,
          "sampling": {"temperature": 0.2}}
    params = synth.validate_parameters({"endpoints": {"policy": ep}})
    over = _overrides(None, None, params["endpoints"], None, None)
    assert over["roles"]["policy"] == {"kind": "openai", "same_as": None,
                                       "endpoints": [{"base_url": "http://127.0.0.1:8000/v1", "model": "served-alias"}],
                                       "vision": True, "timeout_s": 30.0, "sampling": {"temperature": 0.2}}
    cfg = parse_config(_merge({"roles": {"policy": {"kind": "oracle", "max_retries": 2}}}, over), "<parameters>")
    policy = cfg.roles["policy"]
    assert (policy.vision, policy.timeout_s, policy.sampling.temperature, policy.max_retries) == (True, 30.0, 0.2, 2)


def test_a_problem_with_a_parameter_names_the_parameter_not_the_file(tmp_path):
    """A role given by `--param endpoints` with a bad URL: the one line names the key, the config file it was checked
    with, and that the key came from the parameter (the file does not hold it: a user would look there in vain)."""
    import yaml

    from flows.flows import _origins, _overrides, load
    from vrag_data.config import RoleParameter

    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "answer": "a"}\n')
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({"workspace": str(tmp_path / "ws"), "tasks": {"file": str(qa)}, "roles": ORACLE_ROLES,
                                   "synth": {"recipes": ["visor"]}}))
    eps = {"policy": RoleParameter(base_url="ftp://127.0.0.1/v1", model="teacher")}
    with pytest.raises(ConfigError) as err:
        load(str(cfg), None, None, _overrides(None, None, eps, None, None), origins=_origins(None, None, eps, None, None))
    msg = str(err.value)
    assert msg.startswith(f"{cfg}: roles.policy.endpoints[0].base_url: 'ftp://127.0.0.1/v1' is not an http(s) URL"), msg
    assert msg.endswith("(roles.policy is from --param endpoints.policy)"), msg


def test_a_problem_with_a_set_value_names_the_set(tmp_path):
    from typer.testing import CliRunner

    from vrag_data.cli.main import app

    import yaml

    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "answer": "a"}\n')
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({"workspace": str(tmp_path / "ws"), "tasks": {"file": str(qa)}, "roles": ORACLE_ROLES}))
    res = CliRunner().invoke(app, ["run", "--config", str(cfg), "--set", "synth.recipes=[visr]"])
    line = " ".join(res.output.split())
    assert res.exit_code == 2 and "synth.recipes[visr]: unknown recipe" in line, res.output
    assert "(synth.recipes is from --set synth.recipes=...)" in line, res.output
    assert not (tmp_path / "ws").exists()
