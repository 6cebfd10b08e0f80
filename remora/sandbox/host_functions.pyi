# Host functions every tool script can call. Paths are relative to the project root; the job's
# workspace keeps writes until the user applies them (remora analyze --fix).
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

# Python source checks (tree-sitter on the host). Offsets are character offsets into the text
# passed in; lines and columns are 1-based.
def check_docstring(
    source: str, line: int, style: str = "google", include_types: bool = False
) -> dict[str, Any] | None:
    """The class or function starting on `line` (decorators count), or None: kind, name,
    method, nested, line, column (of its name), decorators; status ("missing", "present" or
    "skipped": whether a present docstring agrees with the code is docstring_lint's to say),
    skip_reason; parameters to document (name, doc_name such as "*args", annotation, default,
    kind; no self/cls); result ({section: "Returns" or "Yields", annotation} or None);
    docstring (text, line, end_line, start, end, parsed) or None; template (the docstring to
    write, None where a sentence is needed: in the existing docstring's style, else `style`)
    and needs (summary: bool, parameters: names, result: the section title or None); indent
    (the body's); splice {start, end, before, after}: the new source is
    source[:start] + before + literal + after + source[end:]."""

async def docstring_lint(
    line: int, style: str = "google", text: str | None = None
) -> dict[str, Any]:
    """pydoclint on the node's file (or on `text` as that file), run once per content in the
    OS sandbox, with the nearest pyproject.toml's [tool.pydoclint] (else Remora's defaults in
    the docstring's own style, else `style`): findings (rule, message, line, column, severity,
    help_uri: pydoclint's own) on the docstring of the definition starting on `line` (a
    class's include its __init__'s that pydoclint checks against the class docstring),
    subject ("function", "class" or "none"), signature_line, options (pydoclint's, in effect),
    style, config (the file, or None), command, skip_reason (why an __init__ without a
    docstring needs none, or None). A configuration pydoclint refuses ends the job as an
    error."""

def fix_plan(
    source: str, line: int, lint: dict[str, Any], include_types: bool = False
) -> dict[str, Any] | None:
    """The edit of the docstring that docstring_lint's findings `lint` concern, or None: style,
    indent, splice; parts (every fix, None where the model writes a sentence: needs
    parameters, attributes, result), decided_parts (only what the code decides); per finding
    code decided, drafted, left ({code: why not}); changes (in words)."""

def parse_docstring(docstring: str) -> dict[str, Any]:
    """A Google, NumPy or Sphinx docstring's parts: style (None without sections), summary,
    description, parameters (name, type, description, section), returns and yields (title,
    type, description, or None) and sections (title, body) for everything else."""

def render_docstring(
    parts: dict[str, Any], style: str = "google", indent: str = "    ", width: int = 88
) -> str:
    """The docstring literal for `parts` (shaped like parse_docstring's result) in `style`,
    every line after the first indented with `indent`. Text is not escaped."""

def keep_layout(original: str, before: str, after: str) -> str:
    """`original` (a docstring literal as written) with the lines that changed from `before` to
    `after` (it rendered unedited and edited) changed the same way; `after` whole when a changed
    line has no counterpart in `original`."""

def compare_python(before: str, after: str) -> dict[str, Any]:
    """Whether `after` is `before` with only docstrings changed: ok, problems, parses,
    same_code (the trees with docstrings removed are equal), changed_docstrings (their
    lines). New or changed docstrings must start their own line at the body's indentation."""

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

def test_location(path: str, function: str, tests_dir: str = "tests") -> dict[str, str]:
    """Where the tests of `function` (defined in the file at `path`) go: module, import_root,
    project (as module_name and project_folder give them), folder (the file's own), tests_folder
    (`tests_dir` in the project; "tests" when it names no folder) and test_file
    (tests_folder/test_<the module's last name>_<function>.py)."""

# A function's arguments as JSON (the node's signature; annotations read, never evaluated).
def arguments_schema() -> dict[str, Any]:
    """schema: the JSON schema (Draft 2020-12) of the node's arguments as one object (int,
    float, str, bool, None, list/set/tuple/dict, unions, Literal; a default makes a parameter
    optional; no annotation or no JSON form accepts any value); findings: SMP100/SMP101 for
    the parameters it cannot check."""

def describe_schema(schema: dict[str, Any]) -> str:
    """A short type name for a schema: "number", "list of integer", "one of 'a', 'b'"."""

async def propose_calls(source: str, temperatures: list[float], max_tokens: int = 48) -> list[str]:
    """Distinct calls of the node's function the job's model proposes, one draft per
    temperature, by continuing `result = NAME(` in a test after `source` (the module's code).
    Drafts are proposals: check them before they count."""

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

async def check_tests(path: str, text: str, args: list[str] | None = None) -> dict[str, Any]:
    """pytest on `text` as the file `path` in a throwaway copy of the project (nothing is
    written): passed (test names), failed ({name, message}), exit_code, timed_out, output_tail.
    hypothesis's and anyio's pytest plugins are left out unless the configuration needs them."""

def test_file_text(
    tests: list[dict[str, Any]], title: list[str], tests_folder: str, import_root: str
) -> str:
    """A test module for explore_calls' `tests`: the `title` lines (its docstring), imports,
    the sys.path line for a file in `tests_folder` to import the module from `import_root`."""

def closing_call(text: str) -> str | None:
    """`text` (what follows `name(` in a continued call) cut at the parenthesis that closes
    the call, brackets in string literals ignored; None when it never closes."""

def parse_test_case(case: str, function: str, source: str) -> dict[str, Any]:
    """`case` for the test agent: `f(...) == literal`, `f(...) raises NAME` or `f(...)` (an
    optional leading `assert`), where `function` is a top-level function of the module `source`,
    or `Class(...).method(...)` where `function` is "Class.method" of a top-level class.
    Arguments may only be literals (numbers, strings, bytes, True/False/None, a sign on a
    number), lists, tuples, sets and dicts of them, keyword arguments and constructors of the
    module's top-level classes; the expected value a literal ast.literal_eval reads; NAME a
    built-in exception or a class of the module. Returns kind ("equals", "approx" for a float,
    "raises", "call"), call and expected (code regenerated from the checked tree: render these,
    not the input), names (the module's names it uses, `function` first) and case (the whole
    case regenerated). Anything else raises ValueError saying what is not allowed."""

# Findings two tools of one agent report alike.
def ruff_finding(problem: dict[str, Any], line: int) -> dict[str, Any]:
    """One problem of `ruff check --output-format json` as a finding on `line` (rule, message,
    line, column, severity: error for syntax errors and E9xx, else warning)."""

def ruff_fixed_rules(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """Rule codes with fewer problems in `after` (ruff's JSON after a fix) than in `before`,
    in the order `before` lists them: what the fix removed."""

def docstring_finding(check: dict[str, Any]) -> dict[str, Any]:
    """The missing docstring of this node's check_docstring result under pydocstyle's rule
    (D101 class, D102 method, D103 function, D105 magic method, D106 nested class, D107
    __init__), with its message."""

def docstring_skip_reason(check: dict[str, Any], include_private: bool = False) -> str | None:
    """Why the options leave this node's definition alone (private, nested, or check_docstring's
    own skip_reason), or None."""

# The docstring agent's reading of the code (tree-sitter on the host) and its judgement of drafts.
def docstring_examples(source: str, line: int, limit: int = 3) -> dict[str, Any]:
    """The documented definitions most like the one starting on `line` of `source` (the node's
    file): from the same module, then its folder, then the project (name words, the same
    class, shared callees and parameter names), else the bundled toolz examples. examples
    (best last: name, qualified_name, place "module"/"package"/"project"/"bundled", path,
    summary, text: header + one-line docstring + first body lines), parameters ({name: [{text,
    place, where}]}: the project's sentences for parameters of the same names), voice
    ("imperative", "third_person" or None), bundled (bool)."""

def summary_prompt(
    source: str,
    check: dict[str, Any],
    examples: list[dict[str, Any]],
    code: str,
    end_line: int,
) -> dict[str, str]:
    """The summary prompt for the definition `check` describes (check_docstring, no
    docstring yet): head (the examples' texts, the code once, the header again and an opening
    triple quote: what the model continues), examples, header, body (what the reviewer
    scores). `code` is the node's text, `end_line` its last line. `remora train docstring
    --from-code` renders the same text for documented code."""

def code_facts(source: str, line: int) -> dict[str, Any] | None:
    """Facts about the class or function starting on `line`, or None: name, kind, owner,
    decorators, raises ([{name, description}]: the message, or "If ``condition``.", or ""),
    yields, grounding (the words of its name, parameters, annotations, body, string literals,
    callees, raised exceptions, module and class docstrings), name_words, callees,
    parameters ({name: {annotation, default, kind, uses}}: uses such as "mapping",
    "sequence", "string", "number", "callable", "iterable", "separator"), return_annotation."""

def rank_drafts(
    drafts: list[str],
    facts: dict[str, Any],
    what: str = "summary",
    examples: list[str] = [],
    voice: str | None = None,
    reviewer: list[float | None] = [],
    project: list[str] = [],
) -> list[dict[str, Any]]:
    """The distinct drafts of one sentence, best first: {text, score (0-1), refused (why, or
    None), grounding, agreement, reviewer, notes}. `what`: "summary", "parameter NAME",
    "returns" or "yields". Refused: boilerplate openings, only restating the name, a copy of
    an example summary, code, or (parameters, results) a contradiction of the annotation,
    default or use in the body. Summaries in the third person are rewritten to the imperative
    ("Returns X" -> "Return X") unless `voice` is "third_person". `project`: sentences the
    project wrote for a parameter of this name, taken first when they contradict nothing."""

def doctest_examples(
    tests: list[dict[str, Any]], function: str, limit: int = 2
) -> list[dict[str, str]]:
    """Up to `limit` doctest examples {call, value} from explore_calls' tests of a plain
    function: each test that only asserts `function(...) == LITERAL` (the repr the probe saw)."""

def examples_section(examples: list[dict[str, str]], style: str) -> dict[str, str]:
    """The examples as a render_docstring section ({title, body}: `>>> call` then the value)."""
