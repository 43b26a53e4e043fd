"""Serve the deployments (`synth/default`, `ingest/default`, `export/default`, `report/default`, `train/default`)
from this process: `python -m flows.serve` (what `vrag-data up` starts, with PREFECT_API_URL set). Each flow run
executes in a subprocess in the current working directory, so relative config paths resolve from there.
`prefect.yaml` describes the same deployments for a process work pool."""

from __future__ import annotations

import os

from prefect import serve
from prefect.deployments.runner import EntrypointType, RunnerDeployment

from flows.flows import export, ingest, report, synth, train

DEMO_CONFIG = "configs/demo.yaml"
DEPLOYMENT_NAMES = ("synth/default", "ingest/default", "export/default", "report/default", "train/default")


def deployments() -> list[RunnerDeployment]:
    by_module = {"entrypoint_type": EntrypointType.MODULE_PATH}  # the package is installed: no file paths
    return [
        synth.to_deployment("default", parameters={"config": DEMO_CONFIG}, tags=["vrag-data"], **by_module,
                            description="The whole pipeline for a run config (sample corpus or PDFs -> exports + report)."),
        ingest.to_deployment("default", parameters={"config": DEMO_CONFIG}, tags=["vrag-data"], **by_module,
                             description="Ingest the config's documents (one task per shard) and build the index."),
        export.to_deployment("default", parameters={"config": DEMO_CONFIG}, tags=["vrag-data"], **by_module,
                             description="Export runs of the workspace (HF datasets, LLaMA-Factory, verl, EasyR1)."),
        report.to_deployment("default", parameters={"config": DEMO_CONFIG}, tags=["vrag-data"], **by_module,
                             description="report.duckdb + report.html of the workspace."),
        train.to_deployment("default", parameters={"config": "configs/train/tiny-sft.yaml", "mode": "sft"}, tags=["vrag-data"],
                            **by_module, description="The bundled trainer on an export (sft or rl)."),
    ]


def main() -> None:
    limit = int(os.environ.get("VRAG_SERVE_LIMIT", "4"))  # flow runs at once in this process
    serve(*deployments(), limit=limit, print_starting_message=True)


if __name__ == "__main__":
    main()
