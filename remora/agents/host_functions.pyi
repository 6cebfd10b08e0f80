# Host functions every agent may declare (host_functions: in its agent.yaml). Paths are relative
# to the project root; the job's workspace keeps writes until the user applies them (--fix).
from typing import Any

def read_file(path: str) -> str: ...
def read_original(path: str) -> str | None:
    """The file as the job first saw it, before its own writes (None: it did not exist)."""

def write_file(path: str, content: str) -> None: ...
def list_dir(path: str = ".") -> list[str]: ...
def file_exists(path: str) -> bool: ...
def node_info() -> dict[str, Any]:
    """name, qualified_name, type, file, start_line, end_line, decorators, docstring; for
    functions also signature, parameters (name, annotation, default, kind), return_annotation,
    is_async; for classes bases."""

async def run_command(
    name: str, args: list[str], read_back: list[str] | None = None
) -> dict[str, Any]:
    """Run an allow-listed program in the job's workspace directory, inside the OS sandbox.
    Returns command, exit_code (None on timeout), timed_out, stdout, stderr, truncated. What
    the command writes is thrown away; with `read_back` (paths), also `files`: each path's text
    as the command left it (None: no such regular file, not UTF-8, or larger than
    sandbox.commands.output_limit_kb), e.g. what `ruff check --fix FILE` made of FILE. A
    missing program or a timeout ends the job as an error (the model cannot repair it)."""

async def complete(
    prompt: str, stop: list[str] | None = None, max_tokens: int = 64, temperature: float = 0.0
) -> str:
    """The job's own model continues `prompt` (no chat template): up to `max_tokens` (at most
    256), cut before the first of `stop`; greedy at temperature 0, else sampled (seeded). For
    prose and values a base model writes well, e.g. a docstring after the function's source
    and an opening triple quote. Verify the text before it counts: it may be empty, repeat
    itself or copy the prompt."""

async def complete_drafts(
    prompt: str, stop: list[str] | None, max_tokens: int, temperatures: list[float]
) -> list[str]:
    """One continuation of `prompt` per temperature, in their order: a sentence's or a call's
    drafts, greedy and sampled. The embedded engine decodes up to four together (one batch,
    the prompt evaluated once): cheaper than asking one after another, and the same request
    always gets the same drafts (not the texts `complete` gives for each temperature alone).
    Raises when the model could not be asked (no partial list)."""

async def score_text(prompt: str, continuation: str) -> dict[str, Any]:
    """How likely the job's own model finds `continuation` after `prompt` (nothing is
    generated): logprob (the sum of its tokens' log-probabilities, <= 0) and tokens (how many).
    For reviewer-style reranking: the same code after two candidate docstrings, the likelier
    code explains the better one. Costs a prompt evaluation; keep the continuation short."""

def environment_error(message: str) -> None:
    """Report that the environment, not the model, failed this tool (e.g. ruff could not read
    the project's configuration): the job ends as an error once the script returns."""

def validate_json(value: Any, schema: dict[str, Any]) -> list[str]:
    """`value` checked against a JSON schema (Draft 2020-12) by the jsonschema library: one
    "path: message" per error, [] when valid."""

# Where a file sits in its project, as the job's workspace shows it.
def module_name(path: str) -> dict[str, str]:
    """module: the dotted name the file is imported as; import_root: the folder it is imported
    from (the first folder up without __init__.py; "" for the project root)."""

def project_folder(path: str) -> str:
    """The nearest folder up from the file with pyproject.toml, setup.py, setup.cfg, pytest.ini
    or tox.ini ("" for the project root)."""

async def explore_calls(
    temperatures: list[float] | None = None, model: str = "always"
) -> dict[str, Any]:
    """The input generator of the test and sample_data agents for the node's function or
    method (remora/tool_library/characterize.py): candidate calls from the project's call sites
    and tests, doctest examples, the signature (types, compared literals and their
    neighbours, instances of the module's classes) and the model's completions (one per
    temperature; default [0.0, 0.7, 1.0]; [] asks no model; `model="for branches"`: only when
    the other candidates' chosen calls leave a branch untaken or nothing to pin); each checked
    by parse_test_case, run twice in the OS sandbox under coverage; the few that cover the
    most branches kept. Returns tests
    (rendered test functions: name, code, names to import, uses_pytest), samples (the arguments
    of kept calls that returned, as JSON objects), dropped (reasons: state other tests see, not
    repeating), state (the module or class state some call changed), tried, refused (by the
    allow-list) and coverage (whether branch data was there)."""
