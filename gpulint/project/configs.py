"""Classes a project's configuration files build by name: `target: sgm.models.diffusion.DiffusionEngine` (ldm's
`instantiate_from_config`), Hydra's `_target_:`, Lightning CLI's `class_path:`.

Where a program builds its modules from configs, no Python file names the model it trains; the project model takes
the classes its *training* configs name as built. A class only a sampling or inference config names (a folder or file
named for one, by `vocab.is_training_path`) is not built by training. YAML is read as text (a key and a dotted name on
one line): no YAML parser, and nothing in a config is ever run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from gpulint.project.vocab import is_training_path

# A config larger than this is data (a vocabulary, a dataset index), not a description of what to build.
MAX_CONFIG_BYTES = 512 * 1024
_TARGET = re.compile(r"""^[ \t-]*["']?(?:_target_|target|class_path)["']?[ \t]*:[ \t]*["']?([A-Za-z_][\w.]*)""",
                     re.MULTILINE)


def classes_in(text: str) -> set[str]:
    """The dotted class names a config's `target:` lines build (`sgm.models.diffusion.DiffusionEngine`)."""
    return set(_TARGET.findall(text))


def is_training_config(path: str) -> bool:
    """`configs/example_training/sd.yaml` is; `configs/inference/sv4d.yaml` and `sampling.yaml` are not."""
    return is_training_path(path.rsplit(".", 1)[0] + ".py")


def training_config_classes(paths: Iterable[Path], display=str) -> frozenset[str]:
    """The dotted names of the classes the training configs among `paths` build. Unreadable or oversized files are skipped: a
    config only narrows what the model guesses, it is never needed to lint."""
    found: set[str] = set()
    for path in paths:
        if not is_training_config(display(path)):
            continue
        try:
            if path.stat().st_size > MAX_CONFIG_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "target" in text or "class_path" in text:
            found |= classes_in(text)
    return frozenset(found)
