"""prefect-ray's task runner, plus clean-up of the temporary folder of the local Ray instance it started
(imported only with `runner.kind: ray`: importing Ray costs seconds)."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import ray
from prefect_ray import RayTaskRunner


class PrivateRayTaskRunner(RayTaskRunner):
    """A local Ray instance gets a fresh temporary folder (logs, sockets, spilled objects), removed at the end."""

    def __enter__(self) -> "PrivateRayTaskRunner":
        if self.address is None and not ray.is_initialized():
            # a short path: Ray's unix sockets live there
            self.init_kwargs["_temp_dir"] = tempfile.mkdtemp(prefix="vrag-ray-")
        return super().__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        owned = self._owns_ray
        super().__exit__(*exc_info)
        temp = self.init_kwargs.get("_temp_dir")
        if owned and temp:
            shutil.rmtree(temp, ignore_errors=True)
