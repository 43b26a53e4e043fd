"""The environment every process of this tool runs with: no telemetry, no downloads, no cluster sign-up,
servers on loopback. One dict, used by the CLI's server commands, the Prefect server and the Ray workers."""

from __future__ import annotations

OFFLINE_ENV: dict[str, str] = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_API_HOST": "127.0.0.1",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
}
