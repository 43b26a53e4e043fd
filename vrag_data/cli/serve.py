"""`vrag-data serve-search`: the VRAG-RL-compatible search API over a workspace's index."""

from __future__ import annotations

import os

import typer

from vrag_data.cli.common import console, friendly_errors
from vrag_data.errors import VragError
from vrag_data.store import Workspace

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _check_port(host: str, port: int) -> None:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as err:
            raise VragError(f"{host}:{port} cannot be bound ({err.strerror or err}); pass a free --port") from None


def register(app: typer.Typer) -> None:
    @app.command("serve-search")
    @friendly_errors
    def serve_search(
        workspace: str = typer.Option(..., "-w", "--workspace", help="Workspace with a built index."),
        host: str = typer.Option("127.0.0.1", "--host", help="Bind address (loopback by default)."),
        port: int = typer.Option(8002, "--port"),
        token_env: str | None = typer.Option(None, "--token-env",
                                             help="Env var holding a bearer token that clients must send."),
        image_file: str = typer.Option("path", "--image-file",
                                       help="`path`: local page-image paths (VRAG-RL opens them); `name`: file names."),
    ) -> None:
        """Serve GET/POST /search, /pages/{name} and /healthz until interrupted."""
        import uvicorn

        from vrag_data.retrieve.server import create_app

        token = None
        if token_env:
            token = os.environ.get(token_env)
            if not token:
                raise VragError(f"--token-env {token_env}: that environment variable is empty or unset")
        if image_file not in ("path", "name"):
            raise VragError(f"--image-file {image_file!r}: use `path` or `name`")
        if host not in _LOOPBACK:
            console.print(f"warning: binding {host}; the search API and page images are reachable from the network"
                          + ("" if token else " without a token"), highlight=False)
        _check_port(host, port)  # a taken port: one line and exit 2, before the banner
        app_ = create_app(Workspace(workspace), token=token, image_file=image_file)  # type: ignore[arg-type]
        console.print(f"search server on http://{host}:{port} (GET/POST /search, /pages/{{name}}, /healthz)",
                      highlight=False)
        uvicorn.run(app_, host=host, port=port, log_level="warning")
