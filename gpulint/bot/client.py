"""A small GitHub REST client on requests: headers, pagination, retries and rate limits, an injectable clock.

Retries: 5xx and connection errors are retried a bounded number of times with exponential backoff and jitter. A POST
is not idempotent: before it is sent again, `recover()` (given by the caller) looks for what the first attempt may
have created, and its result is returned instead of a second write. Rate limits: a primary limit
(`x-ratelimit-remaining: 0`) waits until `x-ratelimit-reset`; a secondary limit waits `retry-after`, else at least
60 s, doubling. The token lives only in the session's headers and is never part of a message.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests

from gpulint.cli import UsageError

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"


class GitHubError(Exception):
    """A request that failed for good (after any retries)."""

    def __init__(self, method: str, path: str, status: int | None, message: str):
        self.status = status
        self.message = message
        where = f"{method} {path}"
        super().__init__(f"GitHub API {where}: {status or 'no response'} {message}".strip())

    @property
    def is_permission(self) -> bool:
        """403/404 from a token that may not write here (a fork PR's token, a read-only GITHUB_TOKEN)."""
        return self.status in (401, 403, 404)


class GitHubConfigError(UsageError):
    """Missing token, repository or PR number."""


@dataclass
class RetryPolicy:
    attempts: int = 5  # per request, all causes together
    backoff_s: float = 1.0  # first wait for 5xx / connection errors, doubled each time
    backoff_max_s: float = 30.0
    secondary_min_s: float = 60.0  # GitHub: wait at least a minute when no retry-after is given
    max_wait_s: float = 15 * 60  # a reset further away than this fails instead of waiting


@dataclass
class GitHub:
    token: str
    api_url: str = DEFAULT_API_URL
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    jitter: Callable[[], float] = random.random
    timeout_s: float = 30.0
    log: Callable[[str], None] = lambda msg: print(f"gpulint: {msg}", file=sys.stderr)
    session: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self) -> None:
        if not self.token:
            raise GitHubConfigError("no GitHub token: set GITHUB_TOKEN (or pass --token-env NAME)")
        self.api_url = self.api_url.rstrip("/")
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
        attempt, secondary_waits = 0, 0
        while True:
            attempt += 1
            try:
                resp = self.session.request(method, url, params=params, json=json, timeout=self.timeout_s)
            except (requests.ConnectionError, requests.Timeout) as exc:
                self._give_up_or_wait(method, path, attempt, None, type(exc).__name__)
                found = self._recover(method, recover)
                if found is not None:
                    return found
                continue
            if resp.status_code < 300:
                return resp
            message = _error_message(resp)
            wait = self._rate_limit_wait(resp, message, secondary_waits)
            if wait is not None:
                if wait > self.policy.max_wait_s or attempt >= self.policy.attempts:
                    raise GitHubError(method, path, resp.status_code, f"rate limited ({message})")
                secondary_waits += 1
                self.log(f"GitHub rate limit on {method} {path}: waiting {wait:.0f} s")
                self.sleep(wait)
                continue
            if resp.status_code >= 500:
                self._give_up_or_wait(method, path, attempt, resp.status_code, message)
                found = self._recover(method, recover)
                if found is not None:
                    return found
                continue
            raise GitHubError(method, path, resp.status_code, message)

    def json(self, method: str, path: str, **kw) -> Any:
        resp = self.request(method, path, **kw)
        if not isinstance(resp, requests.Response):
            return resp  # what recover() found
        return resp.json() if resp.content else None

    def paginate(self, path: str, params: dict | None = None) -> Iterator[dict]:
        """Every item of a list endpoint, following `Link: rel="next"` exactly as given."""
        params = {"per_page": 100, **(params or {})}
        url: str | None = path
        while url:
            resp = self.request("GET", url, params=params)
            items = resp.json()
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
        self.log(f"GitHub {method} {path}: {status or what}; retrying in {wait:.1f} s")
        self.sleep(wait)

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
    return msg[:500]
