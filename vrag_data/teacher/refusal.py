"""The one line for an endpoint that refuses every request of a role (HTTP 401, 403 or 404): which role, which server
(its URL as printed: no credentials, no query values), what it answered, and the config key that fixes it.

Such an answer is about the endpoint, not the request: retrying, or asking again with another prompt, gets the same
answer, so the callers stop at the first one instead of counting it as one more failed attempt.
"""

from __future__ import annotations

from http import HTTPStatus

REFUSING = (401, 403, 404)  # the key or the path/model is wrong: no request to this endpoint can succeed
DETAIL_CHARS = 120  # what is shown of the server's own answer (redacted, one line): the cause, bounded on its own


def _phrase(status: int) -> str:
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def refused_fix(config_role: str, idx: int, status: int, api_key_env: str | None) -> str:
    """The config key to check for `status` (401/403: the API key; 404: the URL's path or the model name)."""
    key = f"roles.{config_role}.endpoints[{idx}]"
    if status in (401, 403):
        if api_key_env:
            return f"check {key}.api_key_env (the variable {api_key_env} holds a key this server does not accept)"
        return f"check {key}.api_key_env (none is set: name the environment variable that holds this server's key)"
    return f"check {key}.base_url (the server's OpenAI path, e.g. http://127.0.0.1:8000/v1) and {key}.model"


def refused_line(role: str, config_role: str, idx: int, base_url: str, status: int, request: str,
                 api_key_env: str | None, detail: str = "") -> str:
    """`question writer: http://127.0.0.1:8000/v1 answered HTTP 401 Unauthorized to POST /chat/completions (...); check
    roles.question_writer.endpoints[0].api_key_env (...)`. `base_url` must already be redacted (`redact_url`)."""
    said = " ".join(detail.split())[:DETAIL_CHARS]
    said = f" ({said})" if said else ""
    who = role.replace("_", " ")
    via = f" (as {config_role}, same_as)" if config_role != role else ""
    return (f"{who}{via}: {base_url} answered {_phrase(status)} to {request}{said}; "
            f"{refused_fix(config_role, idx, status, api_key_env)}")
