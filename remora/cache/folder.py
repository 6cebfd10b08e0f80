"""The cache folder itself: what makes a folder usable for Remora's caches, its tags, and
removing it (`remora clean`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from remora.config.loading import LoadedSettings
from remora.discovery.cache import CACHE_SUBDIR, CACHEDIR_TAG, layout_problem
from remora.errors import UserInputError

GITIGNORE = "# Created by Remora.\n*\n"
RESULTS = "results"


MADE_BY_REMORA = frozenset({"CACHEDIR.TAG", ".gitignore", RESULTS, CACHE_SUBDIR})
"""Everything Remora puts in a cache folder: `clean` deletes a folder holding only these (and
what a writer killed midway left: TEMPORARY_SUFFIXES)."""
TEMPORARY_SUFFIXES = (".part", ".tmp")


def cache_location(loaded: LoadedSettings) -> Path:
    """The cache folder of this configuration. One the user chose (their configuration, the
    environment, --cache-dir, a trusted project) is used as given; otherwise it must lie inside
    the project once symbolic links are resolved: a cloned repository could ship
    `.remora_cache` as a link to any folder of the host, which Remora would then write in,
    evict from, and `remora clean` would delete."""
    directory = loaded.base_dir / loaded.settings.cache_dir
    if loaded.set_by_user(("cache_dir",)):
        return directory
    project = loaded.base_dir.resolve()
    if not directory.resolve().is_relative_to(project):
        raise UserInputError(
            f"cache folder {directory} leads outside the project, to {directory.resolve()} "
            "(a symbolic link): remove the link, choose a folder with --cache-dir, or pass "
            "--no-cache"
        )
    return directory


def cache_dir_problem(directory: Path) -> str | None:
    """Why `directory` cannot hold Remora's caches (a file is in the way, a folder Remora did
    not make), or None. A folder that does not exist yet, or is empty, is fine: it is made a
    cache when the first result is stored."""
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
    if problem := layout_problem(directory, hint):
        return problem
    if directory.is_dir() and any(directory.iterdir()) and not made_by_remora(directory):
        return (
            f"cache folder {directory} holds files and is not a Remora cache (no Remora "
            f"CACHEDIR.TAG): Remora does not write in a folder it did not make; {hint}"
        )
    return None


def made_by_remora(directory: Path) -> bool:
    """Whether `directory` carries the CACHEDIR.TAG Remora writes, as a plain file."""
    tag = directory / "CACHEDIR.TAG"
    if tag.is_symlink() or not tag.is_file():
        return False
    try:
        return tag.read_text(encoding="utf-8") == CACHEDIR_TAG
    except (OSError, UnicodeDecodeError):
        return False


def clean(directory: Path) -> bool:
    """Delete a Remora cache folder: only one that is not a link, carries Remora's own tag and
    holds nothing but what Remora puts there; refuses anything else (ValueError)."""
    if not os.path.lexists(directory):
        return False
    if directory.is_symlink() or not directory.is_dir():
        raise ValueError(f"{directory} is not a folder (a link?); not deleting it")
    if not made_by_remora(directory):
        raise ValueError(
            f"{directory} has no CACHEDIR.TAG written by Remora; not deleting a folder Remora "
            "did not make"
        )
    foreign = sorted(
        entry.name
        for entry in directory.iterdir()
        if entry.name not in MADE_BY_REMORA and not entry.name.endswith(TEMPORARY_SUFFIXES)
    )
    if foreign:
        raise ValueError(
            f"{directory} holds what Remora did not put there ({', '.join(foreign[:5])}); not "
            "deleting it"
        )
    shutil.rmtree(directory)
    return True
