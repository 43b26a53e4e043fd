"""Where shard tasks run: threads in this process (`local`), or prefect-ray's `RayTaskRunner` (`ray`).

With `runner.kind: ray` and no `ray_address`, a private local Ray instance is started: its state lives in a
fresh temporary folder, it listens on the loopback interface only, without dashboard or usage statistics,
and it is shut down when the flow ends. With an address (`ray://head:10001` or `auto`), the flow connects to
that cluster; the workers get the Prefect API address and the offline settings through the job's
runtime environment, so their task states land in the same Prefect server. The workspace must then be a
path or URL (fsspec) that every node reads and writes.
"""

from __future__ import annotations

import os
from typing import Any

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from vrag_data.config import RunnerConfig
from vrag_data.errors import VragError
from vrag_data.offline import OFFLINE_ENV as _OFFLINE

# passed on to Ray workers: no telemetry, no downloads, no cluster sign-up
OFFLINE_ENV = {k: v for k, v in _OFFLINE.items() if k != "PREFECT_SERVER_API_HOST"}


def resolve_runner(cfg: RunnerConfig, override: str | None = None) -> RunnerConfig:
    """`--runner local|ray` wins over the config's `runner.kind`."""
    if override is None:
        return cfg
    if override not in ("local", "ray"):
        raise VragError(f"--runner {override!r}: use local or ray")
    return cfg.model_copy(update={"kind": override})


def worker_env(local: bool) -> dict[str, str]:
    from prefect.settings import get_current_settings

    env = {k: os.environ.get(k, v) for k, v in OFFLINE_ENV.items()}
    env["PREFECT_SERVER_EPHEMERAL_ENABLED"] = "false"  # a worker reports to the run's server; it never starts one
    api = get_current_settings().api.url
    if api:  # a test harness sets it in a settings context, not in os.environ: hand it over explicitly
        env["PREFECT_API_URL"] = str(api)
    if local:  # folders of this machine mean nothing on other nodes
        for k in ("PREFECT_HOME", "HF_HOME", "PREFECT_LOCAL_STORAGE_PATH"):
            if os.environ.get(k):
                env[k] = os.environ[k]
    return env


def ray_init_kwargs(cfg: RunnerConfig) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"runtime_env": {"env_vars": worker_env(cfg.ray_address is None)}, "log_to_driver": True}
    if cfg.ray_address is None:
        os.environ.update({k: os.environ.get(k, v) for k, v in OFFLINE_ENV.items()})
        kwargs.update(
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            num_cpus=cfg.max_concurrency,
            object_store_memory=256 * 1024 * 1024,  # shards exchange small summaries, not data
        )
    return kwargs


def make_task_runner(cfg: RunnerConfig) -> TaskRunner:
    if cfg.kind == "local":
        return ThreadPoolTaskRunner(max_workers=cfg.max_concurrency)
    try:
        from flows.ray_runner import PrivateRayTaskRunner
    except ImportError:
        raise VragError("runner.kind ray needs the scale extra: pip install -e '.[scale]' (ray, prefect-ray)") from None
    return PrivateRayTaskRunner(address=cfg.ray_address, init_kwargs=ray_init_kwargs(cfg))


def describe_runner(cfg: RunnerConfig) -> str:
    if cfg.kind == "local":
        return f"local threads (max {cfg.max_concurrency} shards at once)"
    return f"Ray at {cfg.ray_address}" if cfg.ray_address else "a local Ray instance (loopback)"
