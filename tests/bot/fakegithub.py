"""A loopback HTTP server that plays GitHub for the bot's tests.

Every request is validated strictly (unknown body fields refused) against GitHub's official OpenAPI description
(`@octokit/openapi` from the npm registry) with openapi-core; responses start from the description's own examples,
with the server's state (comments, reviews, check runs) laid over them, and are validated tolerantly (problems are
recorded, not fatal: the description lags what GitHub returns).

Fault injection, for the tests of what the bot does when GitHub or the network misbehaves:
- `fail(operation, *faults)` queues faults for the next calls of one operation;
- `fail_nth(n, fault, operation=None)` answers the n-th request (of one operation, or of any) with a status and headers;
- `Fault(..., after_handling=True)` does the work first, then fails or drops the answer (a write that landed, whose
  answer was lost);
- `page_sizes[operation] = k` forces pages of at most k items whatever `per_page` asks;
- `deny_writes = Fault(403, ...)` answers every write with that fault (a token that may only read);
- `meanwhile(operation, change)` changes the state just before the next call of `operation` is served (a person or
  another run acting between two of the bot's requests).
The server is threaded: concurrent runs of the bot share its state under one lock.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from openapi_core import Config, OpenAPI
from openapi_core.contrib.werkzeug import (
    WerkzeugOpenAPIRequest,
    WerkzeugOpenAPIResponse,
)
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Response as WerkzeugResponse

from gpulint.bot.client import GitHub, RetryPolicy

SPEC_DIR_ENV = "GPULINT_OCTOKIT_OPENAPI_DIR"
DEFAULT_SPEC_DIR = Path(__file__).resolve().parents[2] / ".cache/octokit/node_modules/@octokit/openapi/generated"
INSTALL_HINT = "npm install --prefix .cache/octokit @octokit/openapi"
TOKEN = "ghs_fakeTOKEN0123456789abcdefSECRET"

# (method, path template) -> handler name: the operations the bot may call.
OPERATIONS = {
    ("get", "/user"): "get_user",
    ("get", "/repos/{owner}/{repo}/pulls"): "list_pulls",
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"): "get_pull",
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/files"): "list_files",
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"): "list_comments",
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"): "create_comment",
    ("patch", "/repos/{owner}/{repo}/issues/comments/{comment_id}"): "update_comment",
    ("delete", "/repos/{owner}/{repo}/issues/comments/{comment_id}"): "delete_comment",
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/comments"): "list_review_comments",
    ("delete", "/repos/{owner}/{repo}/pulls/comments/{comment_id}"): "delete_review_comment",
    ("patch", "/repos/{owner}/{repo}/pulls/comments/{comment_id}"): "update_review_comment",
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"): "list_reviews",
    ("post", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"): "create_review",
    ("post", "/repos/{owner}/{repo}/check-runs"): "create_check_run",
    ("patch", "/repos/{owner}/{repo}/check-runs/{check_run_id}"): "update_check_run",
    ("get", "/repos/{owner}/{repo}/commits/{ref}/check-runs"): "list_check_runs",
}


def spec_dir() -> Path:
    folder = Path(os.environ.get(SPEC_DIR_ENV) or DEFAULT_SPEC_DIR)
    if not (folder / "api.github.com.json").is_file():
        raise RuntimeError(
            f"GitHub's OpenAPI description is missing from {folder} (set {SPEC_DIR_ENV} or run `{INSTALL_HINT}` "
            "in the repository root): the bot's API tests cannot run without it"
        )
    return folder


def _refs(node, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            out.add(ref)
        for v in node.values():
            _refs(v, out)
    elif isinstance(node, list):
        for v in node:
            _refs(v, out)


def trim_spec(full: dict) -> dict:
    """Only the operations in OPERATIONS and the components they reach: small enough to build in a moment."""
    paths: dict = {}
    for method, template in OPERATIONS:
        item = full["paths"][template]
        paths.setdefault(template, {k: v for k, v in item.items() if k == "parameters"})[method] = item[method]
    trimmed = {k: full[k] for k in ("openapi", "info")}
    trimmed["paths"] = paths
    trimmed["components"] = {}
    todo = set()
    _refs(paths, todo)
    seen: set[str] = set()
    while todo:
        ref = todo.pop()
        if ref in seen or not ref.startswith("#/components/"):
            continue
        seen.add(ref)
        _, _, kind, name = ref.split("/", 3)
        node = full["components"][kind][name]
        trimmed["components"].setdefault(kind, {})[name] = node
        _refs(node, todo)
    return trimmed


def resolve(spec: dict, node):
    while isinstance(node, dict) and "$ref" in node:
        _, _, kind, name = node["$ref"].split("/", 3)
        node = spec["components"][kind][name]
    return node


@dataclass
class Fault:
    status: int | None = 502  # None: close the connection without answering
    headers: dict = field(default_factory=dict)
    body: dict = field(default_factory=lambda: {"message": "Bad Gateway"})
    after_handling: bool = False  # do the work, then fail (a write that happened but whose answer was lost)

    @classmethod
    def dropped(cls) -> Fault:
        """The work is done, then the connection closes without an answer."""
        return cls(None, after_handling=True)

    @classmethod
    def secondary_limit(cls, retry_after: str | None = None) -> Fault:
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        return cls(403, headers, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."})


DENIED = Fault(403, {}, {"message": "Resource not accessible by integration", "status": "403"})
WRITES = ("POST", "PATCH", "PUT", "DELETE")


class FakeGitHub:
    def __init__(self, spec: dict, base_path: str = ""):
        self.spec = spec
        self.base_path = base_path
        self.lock = threading.Lock()
        self.ids = itertools.count(1000)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_port}"
        self.base_url = self.origin + base_path
        spec_here = {**spec, "servers": [{"url": self.base_url}]}
        self.strict = OpenAPI.from_dict(spec_here, config=Config(spec_validator_cls=None,
                                                                 additional_properties_default_policy="forbid"))
        self.lenient = OpenAPI.from_dict(spec_here, config=Config(spec_validator_cls=None))
        self.routes = [(m, t, re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", t) + "$"))
                       for m, t in OPERATIONS]
        # state
        self.owner, self.repo, self.number, self.head_sha = "octo-org", "train", 7, "6dcb09b5b57875f334f61aebed695e2e4193db5e"
        self.repo_id = 1296269
        self.head_ref, self.head_repo = "speed-up", "octo-org/train"  # a fork PR has another head_repo
        self.other_pulls: list[dict] = [{"number": 3, "sha": "0" * 40, "ref": "docs", "repo": "octo-org/train"}]
        self.token_login: str | None = None  # None: GET /user answers 403, as for an Actions GITHUB_TOKEN
        self.writer_login = "github-actions[bot]"
        self.deny_writes: Fault | None = None  # DENIED: a fork PR's token
        self.page_size = 100  # GitHub's own cap on per_page
        self.page_sizes: dict[str, int] = {}  # forced page size per operation
        self.files_limit = 3000  # GitHub lists at most 3,000 files of a pull request
        self.files: list[dict] = []
        self.comments: dict[int, dict] = {}
        self.review_comments: dict[int, dict] = {}
        self.reviews: list[dict] = []
        self.check_runs: dict[int, dict] = {}
        self.faults: dict[str, list[Fault]] = {}
        self.nth_faults: dict[tuple[str | None, int], Fault] = {}
        self.changes: dict[str, list] = {}
        self.counts: dict[str | None, int] = {}  # requests served so far, per operation and (None) in all
        self.log: list[tuple[str, str, dict | None]] = []  # (method, path, json body)
        self.request_errors: list[str] = []
        self.response_problems: list[str] = []
        self.responses_checked: set[tuple[str, int]] = set()
        self.seen_headers: list[dict] = []
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> FakeGitHub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------------------------------ test helpers

    def fail(self, operation: str, *faults: Fault) -> None:
        """Answer the next calls of `operation` with these faults, in order."""
        self.faults.setdefault(operation, []).extend(faults)

    def fail_nth(self, n: int, fault: Fault, operation: str | None = None) -> None:
        """Answer the n-th request (1-based, counted from the server's start) of `operation`, or of any, with `fault`."""
        self.nth_faults[(operation, n)] = fault

    def meanwhile(self, operation: str, change) -> None:
        """Call `change()` just before the next call of `operation` is served."""
        self.changes.setdefault(operation, []).append(change)

    def _fault_for(self, method: str, operation: str) -> Fault | None:
        """Count this request, apply what happens meanwhile, and pick its fault (called under the lock)."""
        pending = self.changes.get(operation)
        if pending:
            pending.pop(0)()
        for key in (operation, None):
            self.counts[key] = self.counts.get(key, 0) + 1
        fault = self.nth_faults.pop((operation, self.counts[operation]), None) or self.nth_faults.pop(
            (None, self.counts[None]), None)
        queued = self.faults.get(operation)
        if fault is None and queued:
            fault = queued.pop(0)
        if fault is None and self.deny_writes is not None and method in WRITES:
            fault = self.deny_writes
        return fault

    def add_review_comment(self, body: str, login: str, path: str = "src/train.py", line: int = 57,
                           in_reply_to: int | None = None) -> dict:
        cid = next(self.ids)
        self.review_comments[cid] = {"id": cid, "body": body, "path": path, "line": line, "start_line": None,
                                     "login": login, "in_reply_to_id": in_reply_to}
        return self.review_comments[cid]

    def add_comment(self, body: str, login: str) -> dict:
        cid = next(self.ids)
        self.comments[cid] = {"id": cid, "body": body, "login": login}
        return self.comments[cid]

    def calls(self, operation: str) -> list[tuple[str, str, dict | None]]:
        method, template = next(k for k, v in OPERATIONS.items() if v == operation)
        rx = next(r for m, t, r in self.routes if (m, t) == (method, template))
        return [c for c in self.log if c[0] == method.upper() and rx.match(c[1])]

    # ------------------------------------------------------------------------------------------ serving

    def example(self, method: str, template: str, status: str):
        op = self.spec["paths"][template][method]
        content = resolve(self.spec, op["responses"][status]).get("content", {}).get("application/json", {})
        examples = content.get("examples") or {}
        first = next(iter(examples.values()))
        return copy.deepcopy(resolve(self.spec, first)["value"])

    def _user(self, template_user: dict, login: str) -> dict:
        return {**template_user, "login": login, "type": "Bot" if login.endswith("[bot]") else "User"}

    def handle(self, method: str, raw_path: str, query: dict, body, operation: str, params: dict):
        """-> (status, json body or None, headers)"""
        fn = getattr(self, "op_" + operation)
        return fn(params, query, body)

    def _page(self, items: list, query: dict, path: str, operation: str):
        page = int(query.get("page", ["1"])[0])
        per = min(int(query.get("per_page", ["30"])[0]), self.page_sizes.get(operation, self.page_size))
        chunk = items[(page - 1) * per: page * per]
        headers = {}
        if page * per < len(items):
            extra = "".join(f"&{k}={v[0]}" for k, v in sorted(query.items()) if k not in ("page", "per_page"))
            headers["Link"] = f'<{self.origin}{path}?per_page={per}&page={page + 1}{extra}>; rel="next"'
        return chunk, headers

    # each op_* returns (status, body, headers)
    def op_get_user(self, params, query, body):
        if self.token_login is None:
            return 403, {"message": "Resource not accessible by integration", "status": "403"}, {}
        user = self.example("get", "/user", "200")
        return 200, {**user, "login": self.token_login}, {}

    def _pull(self) -> dict:
        pull = self.example("get", "/repos/{owner}/{repo}/pulls/{pull_number}", "200")
        pull["number"] = self.number
        pull["head"].update(sha=self.head_sha, ref=self.head_ref)
        pull["head"]["repo"] = {**pull["head"]["repo"], "full_name": self.head_repo}
        pull["base"]["repo"] = {**pull["base"]["repo"], "id": self.repo_id, "full_name": f"{self.owner}/{self.repo}"}
        pull["changed_files"] = len(self.files)
        return pull

    def op_list_pulls(self, params, query, body):
        template = self.example("get", "/repos/{owner}/{repo}/pulls", "200")[0]

        def simple(number, sha, ref, repo):
            head = {**template["head"], "sha": sha, "ref": ref, "repo": {**template["head"]["repo"], "full_name": repo}}
            return {**template, "number": number, "head": head}

        pulls = [simple(p["number"], p["sha"], p["ref"], p["repo"]) for p in self.other_pulls]
        pulls.append(simple(self.number, self.head_sha, self.head_ref, self.head_repo))
        if "head" in query:  # owner:branch
            owner, _, ref = query["head"][0].partition(":")
            pulls = [p for p in pulls if p["head"]["ref"] == ref and p["head"]["repo"]["full_name"].split("/")[0] == owner]
        chunk, headers = self._page(pulls, query, f"{self.base_path}/repos/{self.owner}/{self.repo}/pulls", "list_pulls")
        return 200, chunk, headers

    def op_get_pull(self, params, query, body):
        if int(params["pull_number"]) != self.number:
            return 404, {"message": "Not Found"}, {}
        return 200, self._pull(), {}

    def op_list_files(self, params, query, body):
        template = self.example("get", "/repos/{owner}/{repo}/pulls/{pull_number}/files", "200")[0]
        items = [{**template, **f} for f in self.files[: self.files_limit]]
        path = f"{self.base_path}/repos/{self.owner}/{self.repo}/pulls/{self.number}/files"
        chunk, headers = self._page(items, query, path, "list_files")
        return 200, chunk, headers

    def _comment_json(self, c: dict) -> dict:
        template = self.example("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "201")
        return {**template, "id": c["id"], "body": c["body"], "user": self._user(template["user"], c["login"])}

    def op_list_comments(self, params, query, body):
        items = [self._comment_json(c) for c in sorted(self.comments.values(), key=lambda c: c["id"])]
        path = f"{self.base_path}/repos/{self.owner}/{self.repo}/issues/{self.number}/comments"
        chunk, headers = self._page(items, query, path, "list_comments")
        return 200, chunk, headers

    def op_create_comment(self, params, query, body):
        c = self.add_comment(body["body"], self.writer_login)
        return 201, self._comment_json(c), {}

    def op_update_comment(self, params, query, body):
        c = self.comments.get(int(params["comment_id"]))
        if c is None:
            return 404, {"message": "Not Found"}, {}
        if c["login"] != self.writer_login:
            return 403, {"message": "Must have admin rights to Repository."}, {}
        c["body"] = body["body"]
        return 200, self._comment_json(c), {}

    def op_delete_comment(self, params, query, body):
        return (204, None, {}) if self.comments.pop(int(params["comment_id"]), None) else (404, {"message": "Not Found"}, {})

    def _review_comment_json(self, c: dict) -> dict:
        template = self.example("get", "/repos/{owner}/{repo}/pulls/{pull_number}/comments", "200")[0]
        out = {**template, "id": c["id"], "body": c["body"], "path": c["path"], "line": c["line"],
               "user": self._user(template["user"], c["login"])}
        out.pop("in_reply_to_id", None)
        if c.get("in_reply_to_id"):
            out["in_reply_to_id"] = c["in_reply_to_id"]
        return out

    def op_list_review_comments(self, params, query, body):
        items = [self._review_comment_json(c) for c in sorted(self.review_comments.values(), key=lambda c: c["id"])]
        path = f"{self.base_path}/repos/{self.owner}/{self.repo}/pulls/{self.number}/comments"
        chunk, headers = self._page(items, query, path, "list_review_comments")
        return 200, chunk, headers

    def op_delete_review_comment(self, params, query, body):
        gone = self.review_comments.pop(int(params["comment_id"]), None)
        return (204, None, {}) if gone else (404, {"message": "Not Found"}, {})

    def op_update_review_comment(self, params, query, body):
        c = self.review_comments.get(int(params["comment_id"]))
        if c is None:
            return 404, {"message": "Not Found"}, {}
        if c["login"] != self.writer_login:
            return 403, {"message": "Must have admin rights to Repository."}, {}
        c["body"] = body["body"]
        return 200, self._review_comment_json(c), {}

    def _in_diff(self, path: str, start: int, end: int) -> bool:
        from gpulint.bot.diff import parse_patch

        f = next((f for f in self.files if f["filename"] == path), None)
        return f is not None and parse_patch(path, f.get("patch") or "").in_hunk(start, end)

    def op_list_reviews(self, params, query, body):
        template = self.example("get", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", "200")[0]
        items = [{**template, "id": r["id"], "body": r["body"], "user": self._user(template["user"], r["login"])}
                 for r in self.reviews]
        path = f"{self.base_path}/repos/{self.owner}/{self.repo}/pulls/{self.number}/reviews"
        chunk, headers = self._page(items, query, path, "list_reviews")
        return 200, chunk, headers

    def op_create_review(self, params, query, body):
        comments = body.get("comments", [])
        for c in comments:
            if not self._in_diff(c["path"], c.get("start_line", c["line"]), c["line"]):
                return 422, {"message": "Unprocessable Entity", "errors": [
                    "Pull request review thread line must be part of the diff"], "status": "422"}, {}
        rid = next(self.ids)
        self.reviews.append({"id": rid, "body": body.get("body", ""), "login": self.writer_login})
        for c in comments:
            cid = next(self.ids)
            self.review_comments[cid] = {"id": cid, "body": c["body"], "path": c["path"], "line": c["line"],
                                         "start_line": c.get("start_line"), "login": self.writer_login,
                                         "in_reply_to_id": None}
        review = self.example("post", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", "200")
        return 200, {**review, "id": rid, "body": body.get("body", "")}, {}

    def _check_json(self, run: dict) -> dict:
        template = self.example("post", "/repos/{owner}/{repo}/check-runs", "201")
        return {**template, "id": run["id"], "head_sha": run["head_sha"], "external_id": run["external_id"],
                "name": run["name"]}

    def op_create_check_run(self, params, query, body):
        rid = next(self.ids)
        self.check_runs[rid] = {"id": rid, "name": body["name"], "head_sha": body["head_sha"],
                                "external_id": body.get("external_id", ""), "conclusion": body.get("conclusion"),
                                "output": body.get("output", {}), "annotations": list(body.get("output", {}).get(
                                    "annotations", []))}
        return 201, self._check_json(self.check_runs[rid]), {}

    def op_update_check_run(self, params, query, body):
        run = self.check_runs[int(params["check_run_id"])]
        run["annotations"] += body.get("output", {}).get("annotations", [])
        return 200, self._check_json(run), {}

    def op_list_check_runs(self, params, query, body):
        runs = [self._check_json(r) for r in self.check_runs.values() if r["head_sha"] == params["ref"]]
        return 200, {"total_count": len(runs), "check_runs": runs}, {}


def _handler(fake: FakeGitHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _serve(self):
            method = self.command
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            body = json.loads(raw) if raw else None
            with fake.lock:
                fake.seen_headers.append(dict(self.headers))
                fake.log.append((method, parts.path.removeprefix(fake.base_path), body))
            problem = self._check_headers()
            if not parts.path.startswith(fake.base_path + "/"):
                problem = problem or f"{method} {parts.path}: not under the API base path {fake.base_path!r}"
            route = self._route(method.lower(), parts.path.removeprefix(fake.base_path))
            if route is None:
                problem = problem or f"{method} {parts.path}: no such operation in the fake"
            wz = EnvironBuilder(path=parts.path, base_url=fake.origin,
                                method=method, query_string=parts.query, data=raw,
                                headers={k: v for k, v in self.headers.items()},
                                content_type=self.headers.get("Content-Type")).get_request()
            oreq = WerkzeugOpenAPIRequest(wz)
            result = fake.strict.unmarshal_request(oreq)
            if result.errors:
                details = "; ".join(_explain(e) for e in result.errors)
                problem = problem or f"{method} {parts.path}: request does not match GitHub's description: {details}"
            if problem:
                with fake.lock:
                    fake.request_errors.append(problem)
                return self._send(400, {"message": problem}, {})
            operation, params = route
            with fake.lock:
                fault = fake._fault_for(method, operation)
            if fault and not fault.after_handling:
                return self._fail(fault)
            with fake.lock:
                status, payload, headers = fake.handle(method, parts.path, query, body, operation, params)
            if fault:
                return self._fail(fault)
            if (operation, status) not in fake.responses_checked:  # same template every time: check it once
                fake.responses_checked.add((operation, status))
                response = WerkzeugResponse(json.dumps(payload) if payload is not None else b"", status=status,
                                            content_type="application/json" if payload is not None else None)
                check = fake.lenient.unmarshal_response(oreq, WerkzeugOpenAPIResponse(response))
                if check.errors:
                    with fake.lock:
                        fake.response_problems.append(f"{operation} {status}: " + "; ".join(map(str, check.errors)))
            self._send(status, payload, headers)

        def _check_headers(self) -> str | None:
            h = self.headers
            if h.get("Authorization") != f"Bearer {TOKEN}":
                return "missing or wrong Authorization header"
            if h.get("Accept") != "application/vnd.github+json":
                return f"Accept header is {h.get('Accept')!r}"
            if h.get("X-GitHub-Api-Version") != "2022-11-28":
                return "missing X-GitHub-Api-Version"
            return None

        def _route(self, method: str, path: str):
            for m, t, rx in fake.routes:
                match = rx.match(path)
                if m == method and match:
                    return OPERATIONS[(m, t)], match.groupdict()
            return None

        def _fail(self, fault: Fault):
            if fault.status is None:  # connection reset: no status line at all
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return None
            return self._send(fault.status, fault.body, fault.headers)

        def _send(self, status: int, payload, headers: dict):
            data = json.dumps(payload).encode() if payload is not None else b""
            self.send_response(status)
            if payload is not None:
                self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

    return Handler


def _explain(error) -> str:
    inner = getattr(error, "__cause__", None)
    extra = getattr(inner, "schema_errors", None)
    if extra:
        return f"{error}: " + "; ".join(str(getattr(e, "message", e)) for e in extra)
    return str(error) + (f": {inner}" if inner else "")


class FakeClock:
    """Time that moves only when the bot sleeps: fault tests run instantly and can check every wait."""

    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def make_client(fake: FakeGitHub, clock: FakeClock, logs: list[str] | None = None) -> GitHub:
    return GitHub(token=TOKEN, api_url=fake.base_url, policy=RetryPolicy(), sleep=clock.sleep, clock=clock.time,
                  jitter=lambda: 0.5, log=(logs.append if logs is not None else (lambda m: None)))
