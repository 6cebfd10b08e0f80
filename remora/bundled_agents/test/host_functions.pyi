# The test agent's own host functions (host.py), beside the shared ones.
from typing import Any

def test_location(path: str, function: str, tests_dir: str = "tests") -> dict[str, str]:
    """Where the tests of `function` (defined in the file at `path`) go: module, import_root,
    project (as module_name and project_folder give them), folder (the file's own), tests_folder
    (`tests_dir` in the project; "tests" when it names no folder) and test_file
    (tests_folder/test_<the module's last name>_<function>.py)."""

async def check_tests(path: str, text: str, args: list[str] | None = None) -> dict[str, Any]:
    """pytest on `text` as the file `path` in a throwaway copy of the project (nothing is
    written): passed (test names), failed ({name, message}), exit_code, timed_out, output_tail.
    hypothesis's and anyio's pytest plugins are left out unless the configuration needs them."""

def test_file_text(
    tests: list[dict[str, Any]], title: list[str], tests_folder: str, import_root: str
) -> str:
    """A test module for explore_calls' `tests`: the `title` lines (its docstring), imports,
    the sys.path line for a file in `tests_folder` to import the module from `import_root`."""
