"""Prefect Secret blocks as a place for API keys (`vrag_data.keys`: after the environment of the flow run's process).

A role's `api_key_env: MY_KEY` is looked up in the Secret block `my-key` (lower case, `_` -> `-`: block names are
slugs) of the Prefect API the flow run reports to, only when a Prefect API is configured. Create one without the UI:

    PREFECT_API_URL=http://127.0.0.1:4300/api python -c "import getpass; from prefect.blocks.system import Secret; \
Secret(value=getpass.getpass('MY_KEY: ')).save('my-key', overwrite=True)"

(the key is typed, not put on the command line, so it is in no shell history).
"""

from __future__ import annotations

from typing import Any

from vrag_data.errors import VragError
from vrag_data.keys import KeySource, add_key_source
from vrag_data.secrets import redact

SOURCE = "prefect-secret-block"


def block_name(var: str) -> str:
    """The Secret block that may hold variable `var`'s key: MY_KEY -> my-key."""
    return var.lower().replace("_", "-")


def api_url() -> str | None:
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


def create_command(var: str) -> str:
    """The exact command that saves `var`'s key as a Secret block on the API this process reports to."""
    api = api_url() or "<the API URL `vrag-data up` printed>"
    return (f"PREFECT_API_URL={api} python -c \"import getpass; from prefect.blocks.system import Secret; "
            f"Secret(value=getpass.getpass('{var}: ')).save('{block_name(var)}', overwrite=True)\"")


class SecretBlockError(VragError):
    """The Prefect API could not be asked for a Secret block (not: the block does not exist)."""


def read_secret_block(var: str) -> str | None:
    """The value of Secret block `block_name(var)`, None when there is no such block or no Prefect API is configured."""
    if not api_url():
        return None
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    try:
        with get_client(sync_client=True) as client:
            doc = client.read_block_document_by_name(block_name(var), block_type_slug="secret", include_secrets=True)
    except ObjectNotFound:
        return None
    except Exception as err:  # an API that does not answer is said, not taken for a missing block
        raise SecretBlockError(f"Prefect Secret block {block_name(var)!r} could not be read from {api_url()} "
                               f"({type(err).__name__}: {redact(str(err))[:200]})") from None
    return _plain(doc.data.get("value"))


def _plain(value: Any) -> str | None:
    if value is None:
        return None
    if hasattr(value, "get_secret_value"):
        value = value.get_secret_value()
    return value if isinstance(value, str) and value else None


def _missing(var: str) -> str:
    if not api_url():
        return f"no Prefect API configured to look for a Secret block {block_name(var)!r}"
    return f"no Prefect Secret block {block_name(var)!r} (create it: {create_command(var)})"


def use_secret_blocks() -> None:
    """Keys are looked for in Prefect Secret blocks after the environment (idempotent)."""
    add_key_source(KeySource(SOURCE, read_secret_block, _missing))
