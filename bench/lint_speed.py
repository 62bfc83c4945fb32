"""How fast is `gpulint check`, against its peers, on one corpus of real Python? (A benchmark, not a test.)

    python bench/lint_speed.py                      # corpus: the installed `transformers` package (a subset)
    python bench/lint_speed.py --corpus DIR --peers-venv .venv-bench

Runs, one after the other on the same files: gpulint cold (no cache), gpulint warm (cache filled by a previous run),
Fixit (`fixit lint`), TorchFix (`torchfix`), and ruff (`ruff check`, the speed anchor). Each is timed as a whole
process, best of --repeat runs, and reported as files/s, lines/s and the ratio to gpulint cold. Every tool runs from
compiled bytecode: pip compiled the peers' when it installed them, and gpulint's own is compiled first (an editable
install under PYTHONDONTWRITEBYTECODE would otherwise compile gpulint's sources again on every run). Peers come from
--peers-venv (`make bench` creates it with `pip install fixit torchfix ruff`: TorchFix pins an older libcst, so they
live apart from gpulint's own environment). A peer that is missing is reported as such, not skipped silently.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_MODELS = ("bert", "gpt2", "llama", "t5", "vit", "whisper", "bart", "clip", "mistral", "roberta")


def default_corpus(dest: Path) -> Path:
    """A copy of transformers' top-level modules (trainer, modeling utilities, ...) and ten model families."""
    import transformers

    package = Path(transformers.__file__).parent
    corpus = dest / "transformers"
    corpus.mkdir(parents=True)
    for file in package.glob("*.py"):
        shutil.copy(file, corpus / file.name)
    for model in DEFAULT_MODELS:
        source = package / "models" / model
        if source.is_dir():
            shutil.copytree(source, corpus / "models" / model, ignore=shutil.ignore_patterns("__pycache__"))
    return corpus


def count(corpus: Path) -> tuple[int, int]:
    files = [p for p in corpus.rglob("*.py") if p.is_file()]
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    return len(files), lines


def timed(command: list[str], cwd: Path, repeat: int, env: dict | None = None, before=None,
          finished: frozenset[int] = frozenset({0, 1})) -> tuple[float, int]:
    """The best wall time of `repeat` runs, and the last exit code; an exit code outside `finished` (the codes of a
    run that went through every file) is an error."""
    best = float("inf")
    code = 0
    for _ in range(repeat):
        if before:
            before()
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        best = min(best, time.perf_counter() - start)
        code = proc.returncode
        if code not in finished:
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise RuntimeError(f"{command[0]} exited {code}: {tail[0]}")
    return best, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="folder of Python files (default: a transformers subset)")
    parser.add_argument("--peers-venv", type=Path, default=Path(".venv-bench"), help="venv with fixit, torchfix, ruff")
    parser.add_argument("--repeat", type=int, default=1, help="runs per tool; the best is reported")
    parser.add_argument("--jobs", type=int, default=0, help="gpulint --jobs (default: all cores)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gpulint-speed-"))
    corpus = args.corpus.resolve() if args.corpus else default_corpus(work)
    files, lines = count(corpus)
    import gpulint as package

    compileall.compile_dir(str(Path(package.__file__).parent), quiet=1)
    gpulint = [sys.executable, "-m", "gpulint", "check", ".", "--exit-zero", "--format", "json"]
    if args.jobs:
        gpulint += ["--jobs", str(args.jobs)]
    env = {**os.environ, "NO_COLOR": "1"}
    cache = corpus / ".gpulint_cache"

    results: list[tuple[str, float | None, str]] = []
    cold, _ = timed(gpulint + ["--no-cache"], corpus, args.repeat, env)
    results.append(("gpulint (cold)", cold, ""))
    timed(gpulint, corpus, 1, env, before=lambda: shutil.rmtree(cache, ignore_errors=True))  # fill the cache
    warm, _ = timed(gpulint, corpus, args.repeat, env)
    results.append(("gpulint (warm cache)", warm, ""))
    # A warm run after an edit: the median-sized file gets a new line before each run, so its outline, the project
    # model and the files whose facts change are redone; the rest comes from the cache.
    edited = sorted((p for p in corpus.rglob("*.py") if p.is_file()), key=lambda p: p.stat().st_size)[files // 2]
    original = edited.read_bytes()
    edits = iter(range(10**6))
    try:
        changed, _ = timed(gpulint, corpus, args.repeat, env,
                           before=lambda: edited.write_bytes(original + f"\n# edit {next(edits)}\n".encode()))
    finally:
        edited.write_bytes(original)
    results.append(("gpulint (one file edited)", changed, ""))
    shutil.rmtree(cache, ignore_errors=True)

    bin_dir = args.peers_venv.resolve() / "bin"
    # Fixit's exit code is a bit mask: 1 when it reports violations, 2 when a file failed (unparsable); both finish.
    peers = [
        ("ruff", [str(bin_dir / "ruff"), "check", ".", "--exit-zero", "--no-cache"], frozenset({0, 1})),
        ("Fixit", [str(bin_dir / "fixit"), "lint", "."], frozenset({0, 1, 2, 3})),
        ("TorchFix", [str(bin_dir / "torchfix"), "."], frozenset({0, 1})),
    ]
    for name, command, finished in peers:
        if not Path(command[0]).exists():
            results.append((name, None, f"not installed in {args.peers_venv} (make bench installs it)"))
            continue
        try:
            seconds, _ = timed(command, corpus, args.repeat, env, finished=finished)
            results.append((name, seconds, ""))
        except RuntimeError as exc:
            results.append((name, None, str(exc)))

    print(f"corpus: {corpus} ({files} files, {lines} lines); cores: {os.cpu_count()}; best of {args.repeat}")
    print(f"{'tool':<22}{'seconds':>9}{'files/s':>10}{'lines/s':>11}{'vs gpulint cold':>17}")
    for name, seconds, note in results:
        if seconds is None:
            print(f"{name:<22}{'-':>9}{'-':>10}{'-':>11}{'-':>17}  {note}")
            continue
        ratio = cold / seconds
        print(f"{name:<22}{seconds:>9.2f}{files / seconds:>10.1f}{lines / seconds:>11.0f}{ratio:>16.2f}x")
    fixit = next((s for n, s, _ in results if n == "Fixit"), None)
    ruff = next((s for n, s, _ in results if n == "ruff"), None)
    print()
    if fixit:
        print(f"gpulint cold is {fixit / cold:.1f}x Fixit's files/s (target >= 20x)")
    if ruff:
        print(f"gpulint cold is {cold / ruff:.1f}x slower than ruff (stretch: within 5x)")
    print(f"warm cache is {cold / warm:.1f}x gpulint cold (target >= 10x)")
    print(f"warm after editing one file ({edited.relative_to(corpus)}) is {cold / changed:.1f}x gpulint cold "
          "(target >= 10x)")
    print(f"command: python bench/lint_speed.py{' --corpus ' + str(args.corpus) if args.corpus else ''} --repeat {args.repeat}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
