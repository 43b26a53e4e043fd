"""Serve the deployments `vrag-data/synth`, `vrag-data/ingest`, `vrag-data/export`, `vrag-data/report` and
`vrag-data/train` from this process: `python -m flows.serve` (what `vrag-data up` starts, with PREFECT_API_URL set).

Prefect's CLI finds a deployment by `<flow>/<deployment>` only (`prefect deployment run synth` stops with "Invalid
deployment name"), so the entry flows share the project's name and each deployment is named after what it does:
`prefect deployment run vrag-data/synth --param input=... --watch`. Each flow run executes in a subprocess in the
current working directory: relative paths given as parameters resolve from there, and an error says so.
`prefect.yaml` describes the same deployments for a process work pool."""

from __future__ import annotations

import os

from prefect import serve
from prefect.deployments.runner import EntrypointType, RunnerDeployment

from flows.flows import FLOW, export, ingest, report, synth, train

DEMO_CONFIG = "configs/demo.yaml"
DEPLOYMENT_NAMES = tuple(f"{FLOW}/{d}" for d in ("synth", "ingest", "export", "report", "train"))
SYNTH = DEPLOYMENT_NAMES[0]


def deployments() -> list[RunnerDeployment]:
    by_module = {"entrypoint_type": EntrypointType.MODULE_PATH, "tags": ["vrag-data"]}  # the package is installed
    return [
        # no default config: `--param input=<folder> --param recipe=... --param endpoints=...` (or a config) says what to do
        synth.to_deployment("synth", **by_module,
                            description="PDFs to data: ingest -> index -> tasks (import or generate) -> episodes -> "
                                        "judge + filters -> exports + report."),
        ingest.to_deployment("ingest", parameters={"config": DEMO_CONFIG}, **by_module,
                             description="Ingest the config's documents (one task per shard) and build the index."),
        export.to_deployment("export", parameters={"config": DEMO_CONFIG}, **by_module,
                             description="Export runs of the workspace (HF datasets, LLaMA-Factory, verl, EasyR1)."),
        report.to_deployment("report", parameters={"config": DEMO_CONFIG}, **by_module,
                             description="report.duckdb + report.html of the workspace."),
        train.to_deployment("train", parameters={"config": "configs/train/tiny-sft.yaml", "mode": "sft"}, **by_module,
                            description="The bundled trainer on an export (sft or rl)."),
    ]


def main() -> None:
    limit = int(os.environ.get("VRAG_SERVE_LIMIT", "4"))  # flow runs at once in this process
    serve(*deployments(), limit=limit, print_starting_message=True)


if __name__ == "__main__":
    main()
