"""The llama-cpp-python binding, imported only when a model is loaded: the import itself,
llama.cpp's log forwarded to Python logging, the model parameters, and a check that the token
data layout is the one the decoder writes."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import logging
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from remora.protocol.messages import ModelError

if TYPE_CHECKING:
    import numpy as np
else:

    class _Lazy:
        """numpy on first use: it comes with llama-cpp-python (the `local` extra), and Remora
        imports the engine's modules without it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(importlib.import_module("numpy"), name)

    np = _Lazy()

log = logging.getLogger("remora.models.local.model")
"""llama.cpp's own log lines, under the engine's name (docs/LOCAL_ENGINE.md)."""

INSTALL_HINT = "pip install 'remora[local]'"
_GGML_LOG_WARN, _GGML_LOG_ERROR = 3, 4


TOKEN_DATA_FIELDS = [("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]
"""The layout of llama.cpp's `llama_token_data` (checked against ctypes when loading)."""


def cpu_count() -> int:
    """CPUs this process may run on (container and `taskset` limits included)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def llama_cpp_available() -> bool:
    """Whether the optional dependency is installed, without importing it (importing it starts
    the OpenMP runtime, which must see the settings `import_llama_cpp` makes first)."""
    return importlib.util.find_spec("llama_cpp") is not None


_import_lock = threading.Lock()


_log_callback: Any = None


def import_llama_cpp() -> Any:
    """The `llama_cpp` module (untyped: it ships no stubs), imported once, quietly.

    Before the import, OpenMP is told to put idle threads to sleep instead of spinning
    (`OMP_WAIT_POLICY=PASSIVE`, unless the user set it): during a run, ruff, the sandbox workers
    and other jobs compete for the same cores, and spinning threads then starve each other. On
    two busy cores, generation measured 2 tokens/s with spinning threads and 12-15 with sleeping
    ones. But a thread that sleeps at once pays a wake-up at each of the hundreds of barriers a
    token passes: GNU OpenMP spins 1,000 times before sleeping (`GOMP_SPINCOUNT`, unless set).
    On 2 idle cores a token then takes 19 ms instead of 34, and about the same as without the
    spin when other processes keep one or both cores busy (38-47 ms; measured with a busy loop
    per core). llama.cpp's own log lines go to the `remora.models.local.model` logger instead
    of stderr.
    """
    global _log_callback
    with _import_lock:
        if "OMP_WAIT_POLICY" not in os.environ:
            os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
            # A user's own wait policy keeps its spin count: an explicit GOMP_SPINCOUNT wins.
            os.environ.setdefault("GOMP_SPINCOUNT", "1000")
        try:
            # Imported by name: the package has no type stubs, and through import_module it
            # is one `Any` at this boundary instead of ignores wherever it is used.
            llama_cpp: Any = importlib.import_module("llama_cpp")
        except ImportError as exc:
            raise ModelError(
                f"the embedded engine needs llama-cpp-python: {INSTALL_HINT} ({exc})"
            ) from exc
        if _log_callback is None:
            # Keep a reference: the C side holds only the function pointer.
            _log_callback = llama_cpp.llama_log_callback(_forward_log)
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
        return llama_cpp


def _forward_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    """llama.cpp's log lines to Python logging, never straight to stdout or stderr: warnings
    become INFO (they are notes like "using full-size SWA cache", not the user's concern)."""
    message = text.decode("utf-8", errors="replace").rstrip()
    if message:
        if level == _GGML_LOG_ERROR:
            log.error("%s", message)
        else:
            log.log(logging.INFO if level == _GGML_LOG_WARN else logging.DEBUG, "%s", message)


def check_token_data_layout(llama: Any) -> None:
    if ctypes.sizeof(llama.llama_token_data) != np.dtype(TOKEN_DATA_FIELDS, align=True).itemsize:
        raise ModelError(
            "this llama-cpp-python has a llama_token_data layout Remora does not know; "
            "install llama-cpp-python>=0.3.36"
        )


@contextlib.contextmanager
def model_params_set(llama: Any, *, extra_buffers: bool, sequences: int = 1) -> Iterator[None]:
    """Load with llama.cpp's extra CPU buffer types (AMX, weight repacking) on or off, and
    contexts that hold `sequences` sequences in one KV cache.

    `Llama()` exposes neither `use_extra_bufts` nor `n_seq_max`. With extra buffers on
    (llama.cpp's default) the first decode crashed the process (SIGSEGV) on the Sapphire Rapids
    VM we test on; off costs nothing measurable for a 270M model. Several sequences share one
    unified cache (`kv_unified`): the cells of a prompt copied to another sequence are shared,
    not copied. The defaults functions are swapped only while loading, under the import lock,
    so no other load sees the change.
    """
    low_level = llama.llama_cpp
    model_defaults = low_level.llama_model_default_params
    context_defaults = low_level.llama_context_default_params

    def model_params() -> Any:
        value = model_defaults()
        value.use_extra_bufts = extra_buffers
        return value

    def context_params() -> Any:
        value = context_defaults()
        value.n_seq_max, value.kv_unified = sequences, sequences > 1
        return value

    with _import_lock:
        low_level.llama_model_default_params = model_params
        low_level.llama_context_default_params = context_params
        try:
            yield
        finally:
            low_level.llama_model_default_params = model_defaults
            low_level.llama_context_default_params = context_defaults
