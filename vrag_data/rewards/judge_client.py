"""The answer judge for the trainers' reward entry points (verl `compute_score`, EasyR1): a blocking client of
an OpenAI-compatible endpoint, with bounded retries and an optional durable cache, configured by environment
variables (or the reward kwargs of the same names, lower-case, without the prefix):

- `VRAG_JUDGE_URL` (base URL, e.g. `http://127.0.0.1:8001/v1`) and `VRAG_JUDGE_MODEL`: the judge to ask;
- `VRAG_JUDGE_API_KEY_ENV`: the name of the variable holding its API key (the key itself is never logged);
- `VRAG_JUDGE_CACHE`: a sqlite file; the same question/answer pair is asked once across workers and restarts;
- `VRAG_REWARD_JUDGE=rules`: no endpoint, the rule scorers decide (asked for explicitly).

Without either, a reward that needs a judge raises one line naming these variables: it never falls back to the
rules silently. A judge that stays down or unreadable raises too (naming the endpoint)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from vrag_data.rewards.judge_prompts import HONESTY_SCORE, HONESTY_SYSTEM, JUDGE_SYSTEM, NUDGE, honesty_user, judge_user, parse_judge
from vrag_data.secrets import redact, redact_url, register_secret, register_url_secrets

ATTEMPTS = 3
_LOCK = threading.Lock()
_MEMO: dict[str, bool] = {}


class JudgeConfigError(ValueError):
    """No judge configured for a reward that needs one."""


@dataclass(frozen=True)
class JudgeEndpoint:
    url: str
    model: str
    api_key: str | None = None
    cache: str | None = None
    timeout_s: float = 60.0


def judge_setting(kwargs: dict[str, Any]) -> JudgeEndpoint | str:
    """The configured judge: an endpoint, or "rules"; JudgeConfigError when neither is configured."""
    url = kwargs.get("judge_url") or os.environ.get("VRAG_JUDGE_URL")
    if url:
        register_url_secrets(str(url))  # credentials in the URL never reach a message (messages name `redact_url(url)`)
        model = kwargs.get("judge_model") or os.environ.get("VRAG_JUDGE_MODEL")
        if not model:
            raise JudgeConfigError(f"judge endpoint {redact_url(str(url))}: set VRAG_JUDGE_MODEL to the model it serves")
        key_env = kwargs.get("judge_api_key_env") or os.environ.get("VRAG_JUDGE_API_KEY_ENV")
        key = os.environ.get(key_env) if key_env else None
        register_secret(key)
        if key_env and not key:
            raise JudgeConfigError(f"judge endpoint {redact_url(str(url))}: environment variable {key_env} (its API key) is not set")
        return JudgeEndpoint(str(url).rstrip("/"), str(model), key, kwargs.get("judge_cache") or os.environ.get("VRAG_JUDGE_CACHE"))
    mode = kwargs.get("judge") or os.environ.get("VRAG_REWARD_JUDGE")
    if mode == "rules":
        return "rules"
    raise JudgeConfigError("this reward needs an answer judge: set VRAG_JUDGE_URL and VRAG_JUDGE_MODEL (an OpenAI-compatible "
                           "endpoint), or VRAG_REWARD_JUDGE=rules for the rule scorers")


def _cached(ep: JudgeEndpoint, key: str) -> bool | None:
    if key in _MEMO:
        return _MEMO[key]
    if ep.cache:
        with _LOCK, sqlite3.connect(ep.cache) as con:
            con.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, verdict INTEGER)")
            row = con.execute("SELECT verdict FROM verdicts WHERE key = ?", (key,)).fetchone()
            if row is not None:
                _MEMO[key] = bool(row[0])
                return _MEMO[key]
    return None


def _store(ep: JudgeEndpoint, key: str, verdict: bool) -> None:
    _MEMO[key] = verdict
    if ep.cache:
        with _LOCK, sqlite3.connect(ep.cache) as con:
            con.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, verdict INTEGER)")
            con.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?)", (key, int(verdict)))


def _request_target(base_url: str) -> tuple[str, dict[str, str]]:
    """(the chat URL: `/chat/completions` under the base URL's path, its query kept; a Basic Authorization header for
    the URL's userinfo, which urllib does not send by itself)."""
    parts = urlsplit(base_url)
    url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], path=parts.path.rstrip("/") + "/chat/completions"))
    if parts.username is None:
        return url, {}
    basic = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
    return url, {"Authorization": f"Basic {basic}"}


def _chat(ep: JudgeEndpoint, messages: list[dict[str, str]]) -> str:
    body = json.dumps({"model": ep.model, "messages": messages, "temperature": 0.0, "max_tokens": 64}).encode()
    url, auth = _request_target(ep.url)
    headers = {"Content-Type": "application/json", **auth, **({"Authorization": f"Bearer {ep.api_key}"} if ep.api_key else {})}
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=ep.timeout_s) as resp:  # noqa: S310 - a configured endpoint
        data = json.loads(resp.read(1 << 20))
    # only the verdict is kept (and cached); the reply's text reaches at most an error message, without any configured key
    return redact(str(data["choices"][0]["message"]["content"] or ""))


def ask(ep: JudgeEndpoint, system: str, user: str) -> bool:
    """The judge's verdict, re-asked with a nudge when unreadable; bounded; cached by (model, prompt)."""
    key = hashlib.sha256(json.dumps([ep.model, system, user]).encode()).hexdigest()
    hit = _cached(ep, key)
    if hit is not None:
        return hit
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    last = ""
    for attempt in range(ATTEMPTS):
        try:
            reply = _chat(ep, messages)
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError) as err:
            last = redact(f"{type(err).__name__}: {err}")
            time.sleep(min(2.0, 0.2 * 2**attempt))
            continue
        verdict = parse_judge(reply)
        if verdict is not None:
            _store(ep, key, verdict)
            return verdict
        last = f"unreadable reply {reply[:80]!r}"
        messages = [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": NUDGE}]
    raise RuntimeError(f"judge endpoint {redact_url(ep.url)} (model {ep.model}): no verdict after {ATTEMPTS} attempts ({last}); "
                       "fix the endpoint, or set VRAG_REWARD_JUDGE=rules")


def judge_scores(setting: JudgeEndpoint | str, question: str, reference: str, prediction: str | None,
                 honesty: bool) -> tuple[float | None, float | None]:
    """(judge score, honesty score) for `score_episode`; (None, None) = the rule scorers decide."""
    if setting == "rules" or not isinstance(setting, JudgeEndpoint):
        return None, None
    if not prediction or not prediction.strip():
        return 0.0, 0.0
    if honesty:
        ok = ask(setting, HONESTY_SYSTEM, honesty_user(question, prediction))
        return None, HONESTY_SCORE if ok else 0.0
    ok = ask(setting, JUDGE_SYSTEM, judge_user(question, reference, prediction))
    return (1.0 if ok else 0.0), None
