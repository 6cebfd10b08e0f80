"""The cache folder itself: what makes a folder usable for Remora's caches, its tags, and
removing it (`remora clean`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from remora.discovery.cache import layout_problem

CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by Remora.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
GITIGNORE = "# Created by Remora.\n*\n"
RESULTS = "results"


def cache_dir_problem(directory: Path) -> str | None:
    """Why `directory` cannot hold Remora's caches (a file is in the way), or None. A folder
    that does not exist yet is fine: it is created when the first result is stored."""
    hint = "remove it, choose another folder with --cache-dir (cache_dir), or pass --no-cache"
    if os.path.lexists(directory) and not directory.is_dir():
        return f"cache folder {directory} exists and is not a folder: {hint}"
    above = directory.parent
    while not os.path.lexists(above) and above != above.parent:
        above = above.parent
    if not above.is_dir():
        return f"cache folder {directory} cannot be created: {above} is not a folder: {hint}"
    results = directory / RESULTS
    if os.path.lexists(results) and not results.is_dir():
        return f"{results} (the result cache) is not a folder: {hint}"
    return layout_problem(directory, hint)


def clean(directory: Path) -> bool:
    """Delete a Remora cache directory; refuses a folder that is not tagged as one."""
    if not directory.exists():
        return False
    if not (directory / "CACHEDIR.TAG").is_file():
        raise ValueError(
            f"{directory} has no CACHEDIR.TAG; not deleting a folder Remora did not make"
        )
    shutil.rmtree(directory)
    return True
