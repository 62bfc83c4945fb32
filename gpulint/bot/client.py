"""A small GitHub REST client on requests: headers, pagination, retries and rate limits, an injectable clock.

Retries: 5xx and connection errors are retried a bounded number of times with exponential backoff and jitter. A POST
is not idempotent: before it is sent again, `recover()` (given by the caller) looks for what the first attempt may
have created, and its result is returned instead of a second write. A DELETE is: when its retry finds nothing (404)
the first attempt did the work. Rate limits: a primary limit (`x-ratelimit-remaining: 0`) waits until
`x-ratelimit-reset`; a secondary limit waits `retry-after`, else at least 60 s, doubling. All waiting together stays
inside a deadline (what is left of it also bounds each request's timeout), so a run ends before its job's timeout
with one line saying why.

The token lives only in the session's headers: it is never part of a message, and any text GitHub sends back is
redacted before it is shown (an error body may echo what it was given).
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from gpulint.errors import UsageError

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"
DEFAULT_DEADLINE_S = 240.0  # three `gpulint bot` commands fit the comment job's 15 minutes with room to spare
# What an HTTP header value may hold: visible ASCII. Tokens are [A-Za-z0-9_] (ghs_, ghp_, github_pat_) or JWTs.
_TOKEN = re.compile(r"^[\x21-\x7e]+$")
_TRANSIENT = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


class GitHubError(Exception):
    """A request that failed for good (after any retries)."""

    def __init__(self, method: str, path: str, status: int | None, message: str, *, waiting: bool = False):
        self.method = method
        self.status = status
        self.message = message
        self.waiting = waiting  # GitHub asked us to wait (a rate limit) longer than we may
        super().__init__(f"GitHub API {method} {path}: {status or 'no response'} {message}".strip())

    @property
    def is_permission(self) -> bool:
        """The token may not do this (a fork PR's token, a read-only GITHUB_TOKEN). GitHub answers 404 instead of 403
        for a write to what the token may not see; a rate limit is never a denial, whatever its status."""
        if self.waiting:
            return False
        return self.status in (401, 403) or (self.status == 404 and self.method != "GET")


class GitHubConfigError(UsageError):
    """Missing or malformed token, repository or PR number."""


@dataclass
class RetryPolicy:
    attempts: int = 5  # per request, all causes together
    backoff_s: float = 1.0  # first wait for 5xx / connection errors, doubled each time
    backoff_max_s: float = 30.0
    secondary_min_s: float = 60.0  # GitHub: wait at least a minute when no retry-after is given


@dataclass
class GitHub:
    token: str
    api_url: str = DEFAULT_API_URL
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    jitter: Callable[[], float] = random.random
    timeout_s: float = 30.0
    deadline_s: float = DEFAULT_DEADLINE_S  # all waiting of this client's life, counted from its creation
    log: Callable[[str], None] = lambda msg: print(f"gpulint: {msg}", file=sys.stderr)
    session: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self) -> None:
        self.token = (self.token or "").strip()  # a secret pasted with its line break still works
        if not self.token:
            raise GitHubConfigError("no GitHub token: set GITHUB_TOKEN (or pass --token-env NAME)")
        if not _TOKEN.match(self.token):
            raise GitHubConfigError("the GitHub token holds spaces or characters an HTTP header cannot carry: "
                                    "check the secret for a stray quote or line break")
        self.api_url = self.api_url.rstrip("/")
        self.started = self.clock()
        self.session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "Authorization": f"Bearer {self.token}",
                "User-Agent": "gpulint-bot",
            }
        )

    def __repr__(self) -> str:  # never show the token
        return f"GitHub(api_url={self.api_url!r})"

    def redact(self, text: str) -> str:
        """`text` without the token, as written or URL-encoded (an error body may echo a header or a URL)."""
        for form in {self.token, quote(self.token, safe="")}:
            text = text.replace(form, "***")
        return text

    # ------------------------------------------------------------------------------------------ requests

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        json: Any = None,
        recover: Callable[[], Any] | None = None,
    ) -> requests.Response | Any:
        """Send one request with retries; `path` is relative to the API URL or a full URL on the same host."""
        url = self._url(path)
        attempt, secondary_waits, retried = 0, 0, False
        while True:
            attempt += 1
            try:
                resp = self.session.request(method, url, params=params, json=json, timeout=self._timeout())
            except _TRANSIENT as exc:
                self._give_up_or_wait(method, path, attempt, None, type(exc).__name__)
                retried = True
                found = self._recover(method, recover)
                if found is not None:
                    return found
                continue
            except requests.RequestException as exc:  # a malformed URL or header: retrying cannot help
                raise GitHubError(method, path, None, type(exc).__name__) from None
            if resp.status_code < 300:
                return resp
            if resp.status_code == 404 and method == "DELETE" and retried:
                return resp  # the first attempt deleted it; only its answer was lost
            message = self.redact(_error_message(resp))
            wait = self._rate_limit_wait(resp, message, secondary_waits)
            if wait is not None:
                if attempt >= self.policy.attempts:
                    raise GitHubError(method, path, resp.status_code, f"still rate limited after {attempt} attempts "
                                      f"({message})", waiting=True)
                secondary_waits += 1
                self._wait(wait, method, path, f"rate limit ({message})")
                continue
            if resp.status_code >= 500:
                self._give_up_or_wait(method, path, attempt, resp.status_code, message)
                retried = True
                found = self._recover(method, recover)
                if found is not None:
                    return found
                continue
            raise GitHubError(method, path, resp.status_code, message)

    def json(self, method: str, path: str, **kw) -> Any:
        resp = self.request(method, path, **kw)
        if not isinstance(resp, requests.Response):
            return resp  # what recover() found
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise GitHubError(method, path, resp.status_code, "the answer is not JSON") from None

    def paginate(self, path: str, params: dict | None = None) -> Iterator[dict]:
        """Every item of a list endpoint, following `Link: rel="next"` exactly as given."""
        params = {"per_page": 100, **(params or {})}
        url: str | None = path
        while url:
            resp = self.request("GET", url, params=params)
            try:
                items = resp.json()
            except ValueError:
                items = None
            if not isinstance(items, list):
                raise GitHubError("GET", path, resp.status_code, "expected a list")
            yield from items
            url = resp.links.get("next", {}).get("url")
            params = None  # the next URL carries its own query

    # ------------------------------------------------------------------------------------------ helpers

    def _url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            # A pagination link must stay on the API host: the token is sent with it.
            if urlsplit(path)[:2] != urlsplit(self.api_url)[:2]:
                raise GitHubError("GET", path, None, "refusing to follow a link to another host")
            return path
        return f"{self.api_url}/{path.lstrip('/')}"

    def left_s(self) -> float:
        return self.deadline_s - (self.clock() - self.started)

    def _timeout(self) -> float:
        return max(1.0, min(self.timeout_s, self.left_s()))

    def _wait(self, seconds: float, method: str, path: str, why: str) -> None:
        left = self.left_s()
        if seconds > left:
            raise GitHubError(method, path, None, f"gave up: {why} asks for a wait of {seconds:.0f} s, and only "
                              f"{max(0.0, left):.0f} s of the {self.deadline_s:.0f} s deadline (--deadline) are left",
                              waiting=True)
        self.log(f"GitHub {method} {path}: {why}; waiting {seconds:.1f} s")
        self.sleep(seconds)

    def _rate_limit_wait(self, resp: requests.Response, message: str, secondary_waits: int) -> float | None:
        if resp.status_code not in (403, 429):
            return None
        headers = resp.headers
        if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset", "").isdigit():
            return max(0.0, int(headers["x-ratelimit-reset"]) - self.clock()) + 1
        retry_after = headers.get("retry-after", "")
        if retry_after.isdigit():
            return float(retry_after)
        if resp.status_code == 429 or "secondary rate limit" in message.lower():
            return self.policy.secondary_min_s * 2**secondary_waits
        return None

    def _give_up_or_wait(self, method: str, path: str, attempt: int, status: int | None, what: str) -> None:
        if attempt >= self.policy.attempts:
            raise GitHubError(method, path, status, f"{what} (after {attempt} attempts)")
        wait = min(self.policy.backoff_max_s, self.policy.backoff_s * 2 ** (attempt - 1)) * (0.5 + self.jitter())
        self._wait(wait, method, path, str(status or what))

    def _recover(self, method: str, recover: Callable[[], Any] | None) -> Any:
        if method == "GET" or recover is None:
            return None
        return recover()


def _error_message(resp: requests.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.reason or ""
    if not isinstance(data, dict):
        return resp.reason or ""
    msg = str(data.get("message", resp.reason or ""))
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        details = [str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors[:3]]
        msg += ": " + "; ".join(details)
    return " ".join(msg.split())[:500]  # one line
