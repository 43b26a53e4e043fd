"""Every secret the process knows (API keys read from the environment, and the credentials an endpoint URL carries in
its userinfo or query string), and the helpers that keep them off disk and out of printed lines. A secret is
redacted whatever its length, in every form it can travel in (`forms`: as is, JSON-escaped, HTML-escaped,
URL-encoded; a URL's userinfo also as the base64 `Basic` credentials it is sent as); a form shorter than 8
characters only where it stands alone, so a short key does not eat letters out of ordinary words.

- `redact(text)`: any text about to be stored or printed, with every registered secret replaced by `MARK` (a server
  that echoes the key back in an error body cannot put it on disk);
- `redact_reply(text)`: the same for a model's reply, with the number of replacements (a 200 reply that echoes the
  key is cached, logged and reported without it, and the run counts it);
- `redact_url(url)`: an endpoint URL as it may be stored or printed: userinfo stripped, query values replaced by `MARK`
  (`http://u:pw@host/v1?api_key=sk` -> `http://host/v1?api_key=<redacted>`);
- `register_url_secrets(url)`: registers the credentials of a configured URL, so `redact` catches them in any text."""

from __future__ import annotations

import base64
import html
import json
import re
import threading
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

_LOCK = threading.Lock()
_SECRETS: set[str] = set()
_PATTERN: re.Pattern[str] | None = None  # every form of every secret, longest first (built on first use)
MARK = "<redacted>"
# a form shorter than this is redacted only where it stands alone (not inside a longer word or token), so a short key
# cannot eat letters out of ordinary text; a longer one wherever it occurs
WHOLE_TOKEN_BELOW = 8
_TOKEN = "A-Za-z0-9_"
# query parameters whose values are credentials whatever their length (others, e.g. `api-version=2024-06-01`, only
# from WHOLE_TOKEN_BELOW characters on: a short value there is a setting, not a secret)
_SECRET_PARAM = re.compile(r"key|token|secret|passw|auth|sig|cred|session", re.I)


def register_secret(value: str | None) -> None:
    """Remember `value` (a configured API key, a URL's password): from now on it is redacted, whatever its length, in
    every form it can travel in (`forms`)."""
    global _PATTERN
    if value:
        with _LOCK:
            if value not in _SECRETS:
                _SECRETS.add(value)
                _PATTERN = None


def forms(value: str) -> set[str]:
    """The forms `value` can be written in: as is, JSON-escaped (ASCII-only or not, `/` escaped or not), either of
    those HTML-escaped (a page that shows it), and URL-encoded (`%XX` upper or lower case, a space as `%20` or `+`)."""
    out = {value}
    for j in (json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
        out |= {j, j.replace("/", "\\/")}
    for text in list(out):
        h = html.escape(text)
        out |= {h, html.escape(text, quote=False), h.replace("&quot;", "&#34;").replace("&#x27;", "&#39;")}
    for q in (quote(value, safe=""), quote(value, safe="/"), quote_plus(value)):
        out |= {q, re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), q)}
    return {f for f in out if f}


def basic_credentials(user: str, password: str) -> str:
    """The base64 credentials of `Authorization: Basic ...` for `user:password` (what a URL's userinfo is sent as)."""
    return base64.b64encode(f"{user}:{password}".encode("latin-1", "replace")).decode()


def _pattern() -> re.Pattern[str] | None:
    global _PATTERN
    with _LOCK:
        if _PATTERN is None and _SECRETS:
            every = sorted({f for s in _SECRETS for f in forms(s)}, key=len, reverse=True)
            alts = [re.escape(f) if len(f) >= WHOLE_TOKEN_BELOW else f"(?<![{_TOKEN}]){re.escape(f)}(?![{_TOKEN}])"
                    for f in every]
            _PATTERN = re.compile("|".join(alts))
        return _PATTERN


def redact(text: str) -> str:
    """`text` with every registered secret, in any of its forms, replaced by a mark."""
    return redact_reply(text)[0]


def redact_reply(text: str) -> tuple[str, int]:
    """(`text` with every registered secret, in any of its forms, replaced by a mark, how many were replaced)."""
    if not text:
        return text, 0
    pattern = _pattern()
    if pattern is None:
        return text, 0
    return pattern.subn(MARK, text)


# scheme://[userinfo@]rest, for text that is not one well-formed URL
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*@")


def redact_url(url: str) -> str:
    """`url` without its userinfo, every query value (and a fragment) replaced by `MARK`; the scheme, host, port, path
    and query names are kept, so the stored URL still says which server and which parameters. Pure; never raises."""
    if not url:
        return url
    url = _USERINFO.sub(lambda m: m.group(1), str(url), count=1)  # userinfo stripped: never stored in any form
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
    """Register the credentials `url` carries: the userinfo's password (and its user when there is no password: then
    the user is the credential), the `Basic` credentials that userinfo is sent as, and the values of the query
    parameters (as written and percent-decoded), so `redact` removes them wherever they are echoed."""
    if not url:
        return
    try:
        parts = urlsplit(str(url))
        user, password = parts.username, parts.password
        pairs = [(k, v) for item in parts.query.split("&") for k, _, v in [item.partition("=")]]
        pairs += parse_qsl(parts.query, keep_blank_values=False)
    except ValueError:  # not a URL (a malformed host): nothing to register beyond what redact_url hides
        return
    values = [password] if password else [user]
    if user and password and len(user) >= WHOLE_TOKEN_BELOW:
        values.append(user)  # a long user name may be a token too
    if user is not None or password is not None:
        for u, pw in {(user or "", password or ""), (unquote(user or ""), unquote(password or ""))}:
            register_secret(basic_credentials(u, pw))
    values += [v for k, v in pairs if _SECRET_PARAM.search(k) or len(v) >= WHOLE_TOKEN_BELOW]
    for v in values:
        if v:
            register_secret(v)
            register_secret(unquote(v))
