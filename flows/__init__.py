"""The Prefect layer: tasks that run one library stage on one shard (tasks.py, stages.py), the flows that chain
them (flows.py), the task runner choice (runner.py: threads or Ray), the deployments (serve.py, prefect.yaml)
and the local server behind `vrag-data up/down` (local.py). Nothing under vrag_data/ or pipelines/ imports it."""
