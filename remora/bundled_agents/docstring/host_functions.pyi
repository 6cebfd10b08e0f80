# The docstring agent's own host functions (host.py), beside the shared ones.
from typing import Any

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

def docstring_finding(check: dict[str, Any]) -> dict[str, Any]:
    """The missing docstring of this node's check_docstring result under pydocstyle's rule
    (D101 class, D102 method, D103 function, D105 magic method, D106 nested class, D107
    __init__), with its message."""

def docstring_skip_reason(check: dict[str, Any], include_private: bool = False) -> str | None:
    """Why the options leave this node's definition alone (private, nested, or check_docstring's
    own skip_reason), or None."""

# The docstring agent's reading of the code (tree-sitter on the host) and its judgement of drafts.
def docstring_examples(source: str, line: int, limit: int = 2) -> dict[str, Any]:
    """The documented definitions most like the one starting on `line` of `source` (the node's
    file): from the same module, then its folder, then the project (name words, the same
    class, shared callees and parameter names), else the bundled toolz examples. examples
    (best last: name, qualified_name, place "module"/"package"/"project"/"bundled", path,
    summary, text: header + one-line docstring + first body lines), parameters ({name: [{text,
    place, where}]}: the project's sentences for parameters of the same names), voice
    ("imperative", "third_person" or None), bundled (bool)."""

def code_facts(source: str, line: int) -> dict[str, Any] | None:
    """Facts about the class or function starting on `line`, or None: name, kind, owner,
    decorators, raises ([{name, description}]: the message, or "If ``condition``.", or ""),
    yields, grounding (the words of its name, parameters, annotations, body, string literals,
    callees, raised exceptions, module and class docstrings), name_words, callees,
    parameters ({name: {annotation, default, kind, uses}}: uses such as "mapping",
    "sequence", "string", "number", "callable", "iterable", "separator"), return_annotation."""

def doctest_examples(
    tests: list[dict[str, Any]], function: str, limit: int = 2
) -> list[dict[str, str]]:
    """Up to `limit` doctest examples {call, value} from explore_calls' tests of a plain
    function: each test that only asserts `function(...) == LITERAL` (the repr the probe saw)."""

def examples_section(examples: list[dict[str, str]], style: str) -> dict[str, str]:
    """The examples as a render_docstring section ({title, body}: `>>> call` then the value)."""

async def draft_docstring(
    template: dict[str, Any],
    needs: dict[str, Any],
    check: dict[str, Any],
    facts: dict[str, Any] | None,
    found: dict[str, Any],
    options: dict[str, Any],
    source: str,
) -> dict[str, Any]:
    """Draft every sentence `template` (check_docstring's or fix_plan's) lacks, as `needs`
    says, with the job's own model, after `found` (docstring_examples) and from `facts`
    (code_facts); `options`: temperatures, reviewer. Returns the filled template, problems
    (none: all drafted), confidence (one per sentence), doubts (sentences with too few of
    their words in the code) and drafted (the sentences the model wrote)."""

def raises_sections(
    facts: dict[str, Any] | None, check: dict[str, Any], template: dict[str, Any], width: int
) -> list[dict[str, str]]:
    """A new docstring's Raises section(s) from code_facts' raise sites, in the template's
    style, wrapped at `width`; [] when the template has sections or the docstring exists."""

async def lint_change(style: str, text: str, before: list[dict[str, Any]]) -> dict[str, Any]:
    """docstring_lint on `text` as the node's file, compared with the findings `before` on
    the node's definition: fixed (the codes of `before` it no longer reports), new (its
    findings `before` did not have) and after (docstring_lint's whole answer)."""
