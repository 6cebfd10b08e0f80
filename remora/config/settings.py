"""Configuration: defaults < config file < REMORA_* environment < command-line flags.

The config file is `--config FILE`, else the nearest `remora.yaml` (or `.remora.yaml`), else the
nearest `pyproject.toml` with a `[tool.remora]` table, searched from the working directory up.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

EngineName = Literal["auto", "server", "local"]
ENV_PREFIX = "REMORA_"
DEFAULT_N_CTX = 8192
"""Tokens of context per slot: an agent's prompt (system prompt, tool declarations, the node's
code) plus a few turns of tool results. The KV cache costs 18 KB a token for Gemma 3 270M
(144 MB at 8192)."""
DEFAULT_HF_REPO = "unsloth/functiongemma-270m-it-GGUF"
DEFAULT_HF_FILE = "functiongemma-270m-it-Q8_0.gguf"
"""Q8_0, 292 MB: at 270M parameters the 8-bit file is small and loses nothing noticeable."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _url_list(value: object) -> object:
    """One URL, comma-separated URLs or a list of URLs, as a list (None stays None)."""
    if isinstance(value, str):
        return [url.strip() for url in value.split(",") if url.strip()] or None
    return value


class ServerSettings(Section):
    base_url: Annotated[list[str] | None, BeforeValidator(_url_list)] = None
    """OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 for a local vLLM; a list (or
    comma-separated URLs) spreads jobs over several replicas."""
    api_key: SecretStr = SecretStr("EMPTY")
    """Sent as a bearer token; vLLM accepts anything unless started with --api-key."""
    model: str = "google/functiongemma-270m-it"
    """Served model name (or LoRA adapter name) used by agents without their own."""
    timeout: float = Field(default=60.0, gt=0)
    """A no-progress timeout, in seconds: the longest wait to connect and, once the reply has
    started, between two received bytes. A request the server has accepted
    but not yet started to answer (queued behind others) is not an error: the wait for its
    first byte, and slow but steady progress, are bounded only by `runner.job_timeout`, which
    bounds the whole job. The one request outside a job, the `GET /models` check before any job
    (and each request of `remora check-server`), must complete within `timeout` in total,
    retries included."""
    retries: int = Field(default=3, ge=0, le=20)
    """Retries with exponential backoff on connection errors, no-progress timeouts, 429 and 5xx."""
    max_reply_mb: int = Field(default=16, ge=1, le=4096)
    """Largest reply body accepted, in MiB after decompression (chat replies, error bodies and
    the model listing); a larger reply fails that request with `model_error`."""
    adaptive_concurrency: bool = True
    """Fewer requests in flight than `concurrency` while the server's replies show a queue (its
    shortest replies slow down), so requests are not sent only to wait (docs/SCALING.md);
    false: always `concurrency` at once."""

    @property
    def base_urls(self) -> list[str]:
        return list(self.base_url or [])

    def for_url(self, url: str) -> ServerSettings:
        return self.model_copy(update={"base_url": [url]})


class ModelProfileName(StrEnum):
    AUTO = "auto"
    FUNCTIONGEMMA = "functiongemma"
    """FunctionGemma on a stock vLLM: "auto" every turn, only submit_result on the last."""
    FUNCTIONGEMMA_KIT = "functiongemma-kit"
    """FunctionGemma on Remora's server kit, which constrains forced calls natively."""
    OPENAI = "openai"
    """Models that handle JSON-constrained calls: "required", then a named submit_result."""


class RunnerSettings(Section):
    max_turns: int | None = Field(default=None, ge=1, le=100)
    """Overrides every agent's own max_turns when set."""
    max_tokens: int = Field(default=512, ge=16)
    """Completion token limit per model reply."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    model_profile: ModelProfileName = ModelProfileName.AUTO
    """How tool choice is steered: functiongemma, functiongemma-kit, openai, or auto
    (functiongemma when a model name mentions gemma, else openai)."""
    grammar: Literal["auto", "on", "off"] = "auto"
    """Constrain each reply to well-formed FunctionGemma calls to the tools offered on that turn
    with a vLLM structured-outputs grammar; auto: on for the functiongemma profile (a stock vLLM,
    tool_choice "auto"), off for the others (the kit constrains forced calls itself)."""
    max_repairs: int = Field(default=3, ge=0, le=20)
    """Bad model replies (unknown tool, invalid arguments, no call...) tolerated per job."""
    job_timeout: float = Field(default=300.0, gt=0)
    """Wall-clock seconds one node x agent job may take."""
    stream: bool = True
    """Stream replies: the live view shows calls as they form, a reply that stops making
    progress is given up after server.timeout while a slow one goes on, a reply that may hold
    one call ends with it. false: for servers that cannot stream tool calls."""


class ConfidencePolicy(Section):
    """What the runner does when the model was unsure which tool to call: its confidence is the
    probability it gave the tool's name (docs/CONFIDENCE.md)."""

    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    """Below this, `below` applies; None: confidence is only recorded."""
    below: Literal["resample", "not_done"] = "resample"
    """resample: ask again (`resamples` times at most, seeded) and keep the most confident
    reply; not_done: end the job there, with the reason."""
    resamples: int = Field(default=2, ge=1, le=8)
    temperature: float = Field(default=1.0, gt=0.0, le=2.0)
    """Sampling temperature of the resamples (the turn's own temperature may be 0)."""


class LimitsPreset(StrEnum):
    STRICT = "strict"
    DEFAULT = "default"
    PERMISSIVE = "permissive"


class SandboxLimits(Section):
    """Limits of one tool call; unset values come from the preset."""

    preset: LimitsPreset | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    """Seconds of sandboxed execution per call (time waiting on host functions not counted)."""
    max_memory_mb: int | None = Field(default=None, ge=8)
    """Heap limit per call, in MiB."""
    max_host_calls: int | None = Field(default=None, ge=1)
    """Host function calls (read_file, run_command...) per call."""


PRESET_LIMITS: dict[LimitsPreset, dict[str, float]] = {
    LimitsPreset.STRICT: {"timeout_s": 2.0, "max_memory_mb": 64, "max_host_calls": 100},
    LimitsPreset.DEFAULT: {"timeout_s": 10.0, "max_memory_mb": 256, "max_host_calls": 1000},
    LimitsPreset.PERMISSIVE: {"timeout_s": 60.0, "max_memory_mb": 1024, "max_host_calls": 10000},
}
"""What each preset sets: seconds, MiB and host calls of one tool call."""


def resolved_limits(*layers: SandboxLimits) -> tuple[LimitsPreset, dict[str, float]]:
    """Layers lowest first: the last layer naming a preset picks it, later values override."""
    preset = next((layer.preset for layer in reversed(layers) if layer.preset), None)
    chosen = preset or LimitsPreset.DEFAULT
    values = dict(PRESET_LIMITS[chosen])
    for layer in layers:
        values.update(
            (key, value)
            for key, value in layer.model_dump(exclude={"preset"}).items()
            if key in values and value is not None
        )
    return chosen, values


def _file_name(value: object) -> object:
    """A plain file name (looked up in several folders), not a path."""
    if isinstance(value, str) and (
        value in ("", ".", "..") or any(char in value for char in "/\\\x00")
    ):
        raise ValueError(f"{value!r} is not a plain file name (no folder part)")
    return value


class CommandSettings(Section):
    """Programs tool scripts may run with run_command(), on the host, in the job's workspace."""

    allowed: list[Annotated[str, BeforeValidator(_file_name)]] = Field(
        default_factory=lambda: ["ruff", "pytest", "pydoclint"]
    )
    """Executables, by name (no folder part), looked up next to Remora's Python first, then in
    the absolute folders of PATH; they run only inside the OS sandbox."""
    python_modules: list[str] = Field(default_factory=lambda: ["ruff", "pytest"])
    """Modules allowed as `run_command("python", ["-m", MODULE, ...])`."""
    read_only: list[str] = Field(
        default_factory=lambda: [
            "ruff check --output-format json --exit-zero",
            "ruff check --output-format json",
        ]
    )
    """Commands that only read, each a program and its options. A command that is exactly one
    of these followed by file paths (no further option) runs once per run for each distinct
    content of those files, and every job that asks gets its result: ruff checks a file once,
    not once per node of the file. Never list a command that writes (`ruff check --fix`,
    pytest)."""
    timeout_s: float = Field(default=60.0, gt=0)
    output_limit_kb: int = Field(default=256, ge=1)
    """stdout and stderr are each cut after this many KiB."""
    max_parallel: int = Field(default_factory=lambda: 2 * (os.cpu_count() or 2), ge=1)
    """Commands running at once, across all jobs (the rest wait): default, twice the CPU count.
    A sandboxed command spends much of its time starting (namespaces, mounts, its cgroup,
    fork and exec) with its core idle: rich's lint step on 2 cores took 5.0 s with 2 at once,
    4.1 s with 4."""
    python: Path | None = None
    """The project's Python, where `python -m MODULE` runs (pytest imports the project's
    dependencies there); relative to the project root. Unset: the active virtual environment
    ($VIRTUAL_ENV), else `.venv/` or `venv/` at the project root, else Remora's own Python."""
    python_trusted: bool = False
    """Whether `python` is yours to run on the host: Remora sets it for an interpreter you
    chose, your active environment and a trusted project's `.venv/`. Otherwise the project's
    Python is asked which modules and folders it has only inside the OS sandbox, and believed
    only about its own installation (a cloned repository may ship `.venv/bin/python`)."""
    isolation: Literal["bwrap", "none"] = "bwrap"
    """How commands are confined. `bwrap`: in a bubblewrap sandbox (no network, the filesystem
    read-only except the job's workspace, private /tmp and home, no view of other processes,
    resource limits). `none`: on the host, in a full copy of the project; model-written code
    (tests) then runs with your user's access: only for hosts where bubblewrap cannot run."""
    memory_mb: int = Field(default=2048, ge=64)
    """Memory of each command, in MiB (isolation bwrap): all its processes together, its
    tmpfs folders included, where Remora can make a memory cgroup per command (as root on
    cgroup v1; a delegated cgroup v2 tree), and the address space of each process always
    (RLIMIT_AS). Without such a cgroup only the latter, and Remora says so in a warning."""
    max_processes: int = Field(default=512, ge=8)
    """Processes and threads each command may have at once (isolation bwrap): a fork bomb
    stops there. Enforced by a pids cgroup per command where Remora can create one (as root
    on cgroup v1; a delegated cgroup v2 tree), else by RLIMIT_NPROC, which the kernel does not
    apply to root: as root without a writable pids cgroup there is no process limit."""
    cpu_time_s: int = Field(default=60, ge=1)
    """CPU seconds each process of a command may use (RLIMIT_CPU, isolation bwrap): SIGXCPU,
    then SIGKILL a second later. `timeout_s` bounds the command's wall-clock time."""
    tmp_mb: int = Field(default=128, ge=1)
    """Size in MiB of each command's private /tmp, where its HOME and TMPDIR are, and of its
    /dev/shm (isolation bwrap): tmpfs, held in memory until the command ends."""
    folder_mb: int = Field(default=256, ge=1)
    """Total size in MiB of what a command may keep in its folder, the one place it writes
    (isolation bwrap): a tmpfs, held in memory while the command runs and copied back to the
    job's throwaway folder afterwards. Past it a write fails with ENOSPC."""
    config_files: list[Annotated[str, BeforeValidator(_file_name)]] = Field(
        default_factory=lambda: [
            "pyproject.toml",
            "ruff.toml",
            ".ruff.toml",
            "setup.cfg",
            # Not a program's configuration, but the lint agent reads its python_requires.
            "setup.py",
            "tox.ini",
            "pytest.ini",
            ".pytest.ini",
            "pytest.toml",
            ".pytest.toml",
            "conftest.py",
        ]
    )
    """Configuration files the allowed programs and the agents' tools read (plain file names).
    The content of each one found in a node's folder or any folder above it, up to the project
    root, is part of the result cache key, with the programs' versions: editing one re-runs the
    jobs it can affect."""


class SandboxSettings(SandboxLimits):
    """Limits for every agent (preset null: each agent's own preset, else `default`)."""

    commands: CommandSettings = Field(default_factory=CommandSettings)


def _adapter_folder(value: object) -> Path | Literal[False] | None:
    """A folder, or false (also the word: an environment variable's value is a string); one
    plain error otherwise, not one per member of the union."""
    if value is None:
        return None
    if value is False or (isinstance(value, str) and value.strip().lower() == "false"):
        return False
    if isinstance(value, (str, Path)) and str(value).strip():
        return Path(value)
    raise ValueError("expected a folder made by `remora train`, or false")


class AgentSettings(Section):
    enabled: bool = True
    definition: Path | None = None
    """Path to the agent's YAML file; bundled agents need none."""
    model: str | None = None
    """Served model or LoRA adapter name for this agent (overrides server.model and the
    adapter's name)."""
    adapter: Annotated[
        Path | Literal[False] | None,
        PlainValidator(_adapter_folder, json_schema_input_type=Path | Literal[False] | None),
    ] = None
    """A folder made by `remora train` (relative to the config file's folder), over the
    agent's own `adapter:`; false: the base model, even when the agent's YAML names an adapter.
    The embedded engine applies its adapter.gguf; a server is asked for the adapter's name
    (docs/TRAINING.md)."""
    max_turns: int | None = Field(default=None, ge=1, le=100)
    options: dict[str, Any] = Field(default_factory=dict)
    """Agent-specific options, merged over the defaults in the agent's YAML."""
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    """Tool-call limits for this agent, over the agent's own and the sandbox section."""
    confidence: ConfidencePolicy | None = None
    """Replaces the agent's own `confidence:` section."""


class LocalSettings(BaseModel):
    """The `local:` section: the embedded engine (`pip install 'remora[local]'`)."""

    model_config = ConfigDict(extra="forbid")

    model_path: Path | None = None
    """A GGUF file to load; relative to the config file's folder. Unset: the first found of the
    Hugging Face cache, Remora's model folder, the stand-in package."""
    models_dir: Path | None = None
    """Remora's model folder (default ~/.cache/remora/models)."""
    n_ctx: int = Field(default=DEFAULT_N_CTX, ge=256, le=131072)
    """Context tokens per slot: the longest prompt plus reply an agent may need."""
    threads: int | None = Field(default=None, ge=1)
    """CPU threads per slot (default: the CPUs this process may use, shared by the slots)."""
    slots: int = Field(default=1, ge=1, le=64)
    """Generations at once, each with its own copy of the context (weights are shared)."""
    seed: int = Field(default=0, ge=0)
    """Seed for sampling when runner.temperature > 0 (temperature 0 is greedy)."""
    extra_buffers: bool = False
    """llama.cpp's extra CPU buffer types (AMX, weight repacking); crashed on some VMs."""
    hf_repo: str = DEFAULT_HF_REPO
    """Hugging Face repository `remora models pull functiongemma` downloads from."""
    hf_file: str = DEFAULT_HF_FILE
    """The GGUF file in that repository."""


def _absolute_folder(value: object) -> object:
    """A folder named from anywhere: absolute, or from your home (`~/src`)."""
    if isinstance(value, str | Path) and not Path(value).expanduser().is_absolute():
        raise ValueError(f"{value!r} is not an absolute folder (or one under ~)")
    return value


class RemoraSettings(BaseSettings):
    # Only explicit data is validated here: env, file and flags are merged by `load_settings`,
    # which needs to know where each value came from to name it in errors.
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    runner: RunnerSettings = Field(default_factory=RunnerSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    agents: dict[str, AgentSettings] = Field(default_factory=dict)
    concurrency: int = Field(default=64, ge=1, le=4096)
    """Jobs asking the model at once (each from its first request to its end); keep it high
    enough to fill the server's batch. In one process, jobs that only run tools run beside
    them (`2 x sandbox.commands.max_parallel` more); in worker processes it is the jobs in
    flight."""
    workers: int = Field(default=0, ge=0, le=256)
    """Processes that run jobs against a server, sharing `concurrency`; 0: automatic (one per
    usable core, one per 200 pending jobs). The embedded engine always runs in one process."""
    engine: EngineName = "auto"
    """server, local (the embedded CPU engine), or auto: the server when server.base_url is
    set, else the embedded engine when installed (pip install 'remora[local]')."""
    local: LocalSettings = Field(default_factory=LocalSettings)
    """The embedded engine (docs/LOCAL_ENGINE.md)."""
    cache_dir: Path = Path(".remora_cache")
    """Where results (and parsed files) are cached; relative to the project root."""
    cache_max_mb: int = Field(default=512, ge=1)
    """Cache size limit; least recently used entries are evicted beyond it."""
    trust_project: bool = False
    """Trust the analysed project's own configuration as if you had written it (for this run:
    --trust-project, REMORA_TRUST_PROJECT=1); a project's configuration cannot set it. See
    `remora trust` and docs/RELIABILITY.md."""
    trusted_projects: list[Annotated[Path, BeforeValidator(_absolute_folder)]] = Field(
        default_factory=list
    )
    """Folders whose projects' configurations are trusted, like git's safe.directory (your
    user configuration or the environment; a project's cannot set it)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)
