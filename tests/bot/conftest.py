from __future__ import annotations

import json
import re

import pytest

from .fakegithub import FakeClock, FakeGitHub, spec_dir, trim_spec


def _ghes_file(folder):
    """The newest GHES description shipped in the package (ghes-3.19.json today)."""
    files = [p for p in folder.glob("ghes-*.json") if re.fullmatch(r"ghes-\d+\.\d+\.json", p.name)]
    if not files:
        raise RuntimeError(f"no ghes-*.json in {folder}")
    return max(files, key=lambda p: tuple(int(x) for x in p.stem.split("-")[1].split(".")))


@pytest.fixture(scope="session")
def dotcom_spec() -> dict:
    return trim_spec(json.loads((spec_dir() / "api.github.com.json").read_text()))


@pytest.fixture(scope="session")
def ghes_spec() -> dict:
    return trim_spec(json.loads(_ghes_file(spec_dir()).read_text()))


def _serve(spec: dict, base_path: str):
    fake = FakeGitHub(spec, base_path).start()
    yield fake
    fake.stop()
    assert fake.request_errors == [], "requests the bot sent do not match GitHub's description"


@pytest.fixture(params=["api.github.com", "ghes"])
def fake(request, dotcom_spec, ghes_spec):
    """GitHub.com and GitHub Enterprise Server (base URL .../api/v3), each from its own description."""
    if request.param == "ghes":
        yield from _serve(ghes_spec, "/api/v3")
    else:
        yield from _serve(dotcom_spec, "")


@pytest.fixture
def fake_dotcom(dotcom_spec):
    yield from _serve(dotcom_spec, "")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
