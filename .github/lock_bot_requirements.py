"""Pin what the comment workflow installs, with hashes: `make bot-lock` (run at each release, after the version bump).

The job that holds a write token must not install whatever a registry serves today. It installs, with
`pip install --require-hashes --no-deps --only-binary :all:`, exactly these wheels: gpulint (the wheel built here from
the committed tree, reproducibly: SOURCE_DATE_EPOCH is the author time of the last commit that changed what goes into it (a rebase keeps it), so
anyone can rebuild it and compare; the release uploads this very file) and what `gpulint bot` imports (not libcst or pyyaml: the bot needs neither), at the
versions of this environment, for CPython 3.11 on x86_64 and aarch64 Linux runners. The list is written into
.github/workflows/gpulint-comment.yml between its BEGIN/END lines.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "gpulint-comment.yml"
BOT_NEEDS = ["jinja2", "markupsafe", "requests", "certifi", "charset-normalizer", "idna", "urllib3"]
PLATFORMS = ["manylinux2014_x86_64", "manylinux2014_aarch64"]
WHEEL_INPUTS = ["gpulint", "pyproject.toml", "README.md"]  # what the wheel is built from (its files and metadata)
BLOCK = re.compile(r"(# BEGIN gpulint-bot-requirements\n)(.*?)( *# END gpulint-bot-requirements)", re.DOTALL)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _gpulint_wheel(work: Path) -> Path:
    changed = subprocess.check_output(["git", "-C", str(ROOT), "log", "-1", "--format=%at", "--", *WHEEL_INPUTS],
                                      text=True).strip()
    env = {**os.environ, "SOURCE_DATE_EPOCH": changed}
    src = work / "src"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(work / "dist"), str(src)], check=True, env=env)
    (wheel,) = (work / "dist").glob("gpulint-*.whl")
    return wheel


def main() -> int:
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wheel = _gpulint_wheel(work)
        version = wheel.name.split("-")[1]
        lines.append(f"gpulint=={version} --hash=sha256:{_sha256(wheel)}")
        pins = [f"{name}=={metadata.version(name)}" for name in BOT_NEEDS]
        hashes: dict[str, set[str]] = {pin: set() for pin in pins}
        for platform in PLATFORMS:
            dest = work / platform
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                            "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--platform",
                            platform, "-d", str(dest), *pins], check=True)
            for pin in pins:
                name = pin.split("==")[0].replace("-", "_").lower()
                for file in dest.glob("*.whl"):
                    if file.name.lower().startswith(name + "-"):
                        hashes[pin].add(_sha256(file))
        for pin in pins:
            lines.append(pin + "".join(f" --hash=sha256:{h}" for h in sorted(hashes[pin])))
    text = WORKFLOW.read_text()
    indent = re.search(r"^( *)# BEGIN gpulint-bot-requirements", text, re.MULTILINE).group(1)
    body = "".join(f"{indent}{line}\n" for line in lines)
    WORKFLOW.write_text(BLOCK.sub(lambda m: m.group(1) + body + m.group(3), text))
    print(f"pinned {len(lines)} requirements in {WORKFLOW.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
