"""Synthesis: the episode runner (bounded concurrency, sharded output, exactly-once ledger, progress)."""

from vrag_data.synth.ledger import done_keys, read_trajectories, write_manifest
from vrag_data.synth.progress import RunStats
from vrag_data.synth.runner import error_trajectory, run_episodes

__all__ = ["RunStats", "done_keys", "error_trajectory", "read_trajectories", "run_episodes", "write_manifest"]
