"""Every secret the process knows (API keys read from the environment, and the credentials an endpoint URL carries in
its userinfo or query string), and the helpers that keep them off disk and out of printed lines:

- `redact(text)`: any text about to be stored or printed, with every registered secret replaced by `MARK` (a server
  that echoes the key back in an error body cannot put it on disk);
- `redact_reply(text)`: the same for a model's reply, with the number of replacements (a 200 reply that echoes the
  key is cached, logged and reported without it, and the run counts it);
- `redact_url(url)`: an endpoint URL as it may be stored or printed: userinfo and query values replaced by `MARK`
  (`http://u:pw@host/v1?api_key=sk` -> `http://<redacted>@host/v1?api_key=<redacted>`);
- `register_url_secrets(url)`: registers the credentials of a configured URL, so `redact` catches them in any text.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import parse_qsl, unquote, urlsplit

_LOCK = threading.Lock()
_SECRETS: set[str] = set()
MARK = "<redacted>"
MIN_SECRET_CHARS = 8  # shorter values would redact ordinary words


def register_secret(value: str | None) -> None:
    """Remember `value` (short values are ignored: they would redact ordinary words)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _LOCK:
            _SECRETS.add(value)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by a mark."""
    return redact_reply(text)[0]


def redact_reply(text: str) -> tuple[str, int]:
    """(`text` with every registered secret replaced by a mark, how many were replaced)."""
    if not text or not _SECRETS:
        return text, 0
    n = 0
    for s in sorted(_SECRETS, key=len, reverse=True):
        if s in text:
            n += text.count(s)
            text = text.replace(s, MARK)
    return text, n


# scheme://[userinfo@]rest, for text that is not one well-formed URL
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*@")


def redact_url(url: str) -> str:
    """`url` with its userinfo and every query value (and a fragment) replaced by `MARK`; the scheme, host, port, path
    and query names are kept, so the stored URL still says which server and which parameters. Pure; never raises."""
    if not url:
        return url
    url = _USERINFO.sub(lambda m: m.group(1) + MARK + "@", str(url), count=1)
    head, sep, query = url.partition("?")
    frag = ""
    if not sep:
        head, sep_f, frag = url.partition("#")
        return head + (f"#{MARK}" if sep_f else "")
    query, sep_f, frag = query.partition("#")
    parts = []
    for item in query.split("&"):
        if not item:
            continue
        name, eq, _ = item.partition("=")
        parts.append(f"{name}={MARK}" if eq else MARK)
    return head + "?" + "&".join(parts) + (f"#{MARK}" if sep_f else "")


def register_url_secrets(url: str | None) -> None:
    """Register the credentials `url` carries: the userinfo's user and password, and every query value (as written
    and percent-decoded), so `redact` removes them wherever they are echoed."""
    if not url:
        return
    try:
        parts = urlsplit(str(url))
        values = [parts.username, parts.password]
        values += [v for _, v in parse_qsl(parts.query, keep_blank_values=False)]
        values += [item.partition("=")[2] for item in parts.query.split("&")]
    except ValueError:  # not a URL (a malformed host): nothing to register beyond what redact_url hides
        return
    for v in values:
        if v:
            register_secret(v)
            register_secret(unquote(v))
