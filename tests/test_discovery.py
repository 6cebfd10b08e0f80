"""Discovery against real files and the real tree-sitter parser."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections import Counter
from pathlib import Path

import pytest

from remora.discovery.discover import Discovery, DiscoveryError, discover_nodes
from remora.discovery.nodes import MODULE_QUALNAME, Node, NodeType

STDLIB = Path(sysconfig.get_paths()["stdlib"])

Signature = tuple[str, str, int, int]  # qualified name, type, start line, end line


def write(root: Path, relative: str, content: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        # newline="" keeps "\r\n" in the content as written.
        path.write_text(content, encoding="utf-8", newline="")
    else:
        path.write_bytes(content)
    return path


def definitions(discovery: Discovery, file: str | None = None) -> dict[str, Node]:
    """Non-file nodes by id."""
    return {
        node.id: node
        for node in discovery.nodes
        if node.type is not NodeType.FILE and (file is None or node.file == file)
    }


def by_qualname(discovery: Discovery) -> dict[str, Node]:
    return {node.qualified_name: node for node in definitions(discovery).values()}


def ast_signatures(source: bytes) -> Counter[Signature]:
    """What `ast` says the definitions are, by the same rules discovery uses."""
    found: Counter[Signature] = Counter()

    def visit(node: ast.AST, prefix: str, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualified_name = f"{prefix}.{child.name}" if prefix else child.name
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                if isinstance(child, ast.ClassDef):
                    kind = NodeType.CLASS
                else:
                    kind = NodeType.METHOD if in_class else NodeType.FUNCTION
                assert child.end_lineno is not None
                found[(qualified_name, kind.value, start, child.end_lineno)] += 1
                visit(child, qualified_name, isinstance(child, ast.ClassDef))
            else:
                visit(child, prefix, in_class)

    visit(ast.parse(source), "", False)
    return found


def discovered_signatures(discovery: Discovery, file: str) -> Counter[Signature]:
    return Counter(
        (node.qualified_name, node.type.value, node.start_line, node.end_line)
        for node in definitions(discovery, file).values()
    )


def assert_ranges_consistent(discovery: Discovery, root: Path) -> None:
    """Every node's text is its byte range decoded, and its lines match its text."""
    data = {file: (root / file).read_bytes() for file in discovery.files}
    for node in discovery.nodes:
        assert data[node.file][node.start_byte : node.end_byte].decode("utf-8") == node.text
        if node.type is not NodeType.FILE:
            assert node.end_line - node.start_line == node.text.count("\n"), node.id


# Ground truth -------------------------------------------------------------------------------


@pytest.mark.parametrize("package", ["json", "email", "asyncio"])
def test_matches_ast_on_stdlib_packages(package: str) -> None:
    discovery = discover_nodes([STDLIB / package], root=STDLIB)

    expected_files = sorted(
        path.relative_to(STDLIB).as_posix()
        for path in (STDLIB / package).rglob("*.py")
        if "__pycache__" not in path.parts
    )
    assert discovery.files == expected_files
    assert discovery.warnings == []
    for file in discovery.files:
        expected = ast_signatures((STDLIB / file).read_bytes())
        assert discovered_signatures(discovery, file) == expected, file
    assert_ranges_consistent(discovery, STDLIB)


def test_worker_processes_give_the_same_result() -> None:
    paths = [STDLIB / "json", STDLIB / "email"]
    in_process = discover_nodes(paths, root=STDLIB, workers=1)
    in_workers = discover_nodes(paths, root=STDLIB, workers=2)
    assert in_workers == in_process


# Definitions --------------------------------------------------------------------------------


def test_nested_and_async_functions(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.py",
        "def outer():\n"
        "    def inner():\n"
        "        async def innermost():\n"
        "            pass\n"
        "        return innermost\n"
        "    return inner\n"
        "\n"
        "async def fetch():\n"
        "    await thing()\n",
    )
    nodes = by_qualname(discover_nodes([tmp_path], root=tmp_path))
    assert {name: node.type for name, node in nodes.items()} == {
        "outer": NodeType.FUNCTION,
        "outer.inner": NodeType.FUNCTION,
        "outer.inner.innermost": NodeType.FUNCTION,
        "fetch": NodeType.FUNCTION,
    }
    assert (nodes["outer"].start_line, nodes["outer"].end_line) == (1, 6)
    assert (nodes["outer.inner.innermost"].start_line, nodes["outer.inner.innermost"].end_line) == (
        3,
        4,
    )
    assert nodes["fetch"].text == "async def fetch():\n    await thing()"


def test_decorated_definitions_include_their_decorators(tmp_path: Path) -> None:
    source = (
        "@register(\n"
        "    name='thing',\n"
        ")\n"
        "@dataclass\n"
        "class Thing:\n"
        "    @property\n"
        "    def size(self):\n"
        "        return 1\n"
        "\n"
        "@cache\n"
        "def compute():\n"
        "    return 2\n"
    )
    write(tmp_path, "a.py", source)
    nodes = by_qualname(discover_nodes([tmp_path], root=tmp_path))

    thing = nodes["Thing"]
    assert (thing.type, thing.start_line, thing.end_line) == (NodeType.CLASS, 1, 8)
    assert thing.start_byte == 0
    assert thing.text.startswith("@register(\n")
    size = nodes["Thing.size"]
    assert (size.type, size.start_line, size.end_line) == (NodeType.METHOD, 6, 8)
    assert size.text == "@property\n    def size(self):\n        return 1"
    compute = nodes["compute"]
    assert (compute.start_line, compute.end_line) == (10, 12)
    assert compute.start_byte == source.index("@cache")


def test_methods_of_nested_classes(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.py",
        "class Outer:\n"
        "    class Inner:\n"
        "        def method(self):\n"
        "            def helper():\n"
        "                class Local:\n"
        "                    def deep(self): ...\n"
        "            return helper\n"
        "    def outer_method(self): ...\n",
    )
    nodes = by_qualname(discover_nodes([tmp_path], root=tmp_path))
    assert {name: node.type for name, node in nodes.items()} == {
        "Outer": NodeType.CLASS,
        "Outer.Inner": NodeType.CLASS,
        "Outer.Inner.method": NodeType.METHOD,
        "Outer.Inner.method.helper": NodeType.FUNCTION,
        "Outer.Inner.method.helper.Local": NodeType.CLASS,
        "Outer.Inner.method.helper.Local.deep": NodeType.METHOD,
        "Outer.outer_method": NodeType.METHOD,
    }


def test_definitions_inside_if_and_try_blocks(tmp_path: Path) -> None:
    source = (
        "import sys\n"
        "if sys.version_info >= (3, 12):\n"
        "    def compat():\n"
        "        return 1\n"
        "else:\n"
        "    def compat():\n"
        "        return 2\n"
        "try:\n"
        "    from fast import speedup\n"
        "except ImportError:\n"
        "    def speedup():\n"
        "        pass\n"
        "\n"
        "class Config:\n"
        "    if sys.platform == 'win32':\n"
        "        def path(self):\n"
        "            def join():\n"
        "                pass\n"
        "    try:\n"
        "        import tomllib\n"
        "    except ImportError:\n"
        "        @staticmethod\n"
        "        def load():\n"
        "            pass\n"
    )
    write(tmp_path, "a.py", source)
    discovery = discover_nodes([tmp_path], root=tmp_path)
    found = discovered_signatures(discovery, "a.py")
    assert found == ast_signatures(source.encode())
    assert found == Counter(
        {
            ("compat", "function", 3, 4): 1,
            ("compat", "function", 6, 7): 1,
            ("speedup", "function", 11, 12): 1,
            ("Config", "class", 14, 24): 1,
            ("Config.path", "method", 16, 18): 1,
            ("Config.path.join", "function", 17, 18): 1,
            ("Config.load", "method", 22, 24): 1,
        }
    )


def test_trailing_comments_are_not_part_of_a_definition(tmp_path: Path) -> None:
    # tree-sitter puts these comments inside the body; ranges follow `ast` and end at the code.
    source = "class A:\n    def f(self):\n        x = 1\n        # done\n\n    # later\n\ny = 2\n"
    write(tmp_path, "a.py", source)
    nodes = by_qualname(discover_nodes([tmp_path], root=tmp_path))
    assert (nodes["A"].end_line, nodes["A.f"].end_line) == (3, 3)
    assert nodes["A"].text.endswith("x = 1")


def test_duplicate_qualified_names_get_distinct_ids(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.py",
        "class C:\n"
        "    @property\n"
        "    def x(self):\n"
        "        return self._x\n"
        "    @x.setter\n"
        "    def x(self, value):\n"
        "        self._x = value\n",
    )
    discovery = discover_nodes([tmp_path], root=tmp_path)
    ids = [node.id for node in discovery.nodes]
    assert ids == ["a.py::<module>", "a.py::C", "a.py::C.x", "a.py::C.x@2"]
    assert [node.start_line for node in discovery.nodes] == [1, 1, 2, 5]


def test_ids_are_stable_across_runs(tmp_path: Path) -> None:
    write(tmp_path, "pkg/a.py", "def f(): pass\ndef f(): pass\nclass C:\n    def m(self): pass\n")
    write(tmp_path, "pkg/b.py", "def g(): pass\n")
    first = discover_nodes([tmp_path], root=tmp_path)
    second = discover_nodes([tmp_path], root=tmp_path)
    assert first == second
    assert [node.id for node in first.nodes] == [
        "pkg/a.py::<module>",
        "pkg/a.py::f",
        "pkg/a.py::f@2",
        "pkg/a.py::C",
        "pkg/a.py::C.m",
        "pkg/b.py::<module>",
        "pkg/b.py::g",
    ]


# Files --------------------------------------------------------------------------------------


def test_file_node(tmp_path: Path) -> None:
    write(tmp_path, "pkg/mod.py", "import os\n\nx = 1\n")
    (node,) = discover_nodes([tmp_path], root=tmp_path).nodes
    assert node == Node(
        id="pkg/mod.py::<module>",
        type=NodeType.FILE,
        name="mod.py",
        qualified_name=MODULE_QUALNAME,
        file="pkg/mod.py",
        start_line=1,
        start_column=1,
        end_line=3,
        start_byte=0,
        end_byte=17,
        text="import os\n\nx = 1\n",
    )


@pytest.mark.parametrize(
    ("content", "lines"),
    [(b"", 1), (b"\n", 1), (b"a = 1", 1), (b"a = 1\nb = 2\n", 2), (b"a = 1\nb = 2", 2)],
)
def test_file_node_line_count(tmp_path: Path, content: bytes, lines: int) -> None:
    write(tmp_path, "a.py", content)
    (node,) = discover_nodes([tmp_path], root=tmp_path).nodes
    assert (node.start_line, node.end_line) == (1, lines)
    assert (node.start_byte, node.end_byte) == (0, len(content))


def test_syntax_errors_still_give_definitions(tmp_path: Path) -> None:
    write(
        tmp_path,
        "broken.py",
        "def good():\n"
        "    return 1\n"
        "\n"
        "def broken(:\n"
        "    pass\n"
        "\n"
        "class Later:\n"
        "    def method(self):\n"
        "        return 2\n",
    )
    write(tmp_path, "garbage.py", ")))) ((( def class :::\n\x7f\tlambda\n")
    discovery = discover_nodes([tmp_path], root=tmp_path)
    assert discovery.files == ["broken.py", "garbage.py"]
    assert discovery.warnings == []
    found = by_qualname(discovery)
    assert {"good", "Later", "Later.method"} <= found.keys()
    assert found["Later.method"].type is NodeType.METHOD
    assert next(node for node in discovery.nodes if node.file == "garbage.py").id == (
        "garbage.py::<module>"
    )


def test_valid_python_the_grammar_rejects_gets_the_definitions_ast_sees(tmp_path: Path) -> None:
    # tree-sitter-python fails on this continuation line (as in the stdlib's test_compile.py)
    # and its error recovery loses the nesting of what follows; Python's parser takes over.
    source = (
        "\ufeffclass A:\n"
        "    def f(self):\n"
        "        x = (bar.\n"
        "    baz)\n"
        "        return x  # ok\n"
        "\n"
        "    @property\n"
        "    @  other(1)\n"
        "    def g(self):\n"
        "        def inner(): pass\n"
        "        # trailing comment\n"
        "\n"
        "async def h(): pass\n"
    )
    write(tmp_path, "a.py", source)
    discovery = discover_nodes([tmp_path], root=tmp_path)
    data = source.encode()
    assert discovered_signatures(discovery, "a.py") == ast_signatures(data)
    nodes = by_qualname(discovery)
    assert (
        nodes["A.g"].text
        == "@property\n    @  other(1)\n    def g(self):\n        def inner(): pass"
    )
    assert (nodes["A.g"].start_line, nodes["A.g"].start_column) == (7, 5)
    assert nodes["A"].start_byte == 3  # after the byte order mark
    assert nodes["h"].type is NodeType.FUNCTION
    assert_ranges_consistent(discovery, tmp_path)


def test_non_utf8_and_binary_files_are_skipped_with_warnings(tmp_path: Path) -> None:
    write(tmp_path, "latin1.py", "# -*- coding: latin-1 -*-\nname = 'café'\n".encode("latin-1"))
    write(tmp_path, "blob.py", b"\x00\x01\x02def f(): pass\n")
    write(tmp_path, "good.py", "def f(): pass\n")
    discovery = discover_nodes([tmp_path], root=tmp_path)
    assert discovery.files == ["good.py"]
    assert [node.id for node in discovery.nodes] == ["good.py::<module>", "good.py::f"]
    assert [warning.file for warning in discovery.warnings] == ["blob.py", "latin1.py"]
    assert "binary" in discovery.warnings[0].message
    assert "UTF-8" in discovery.warnings[1].message


def test_crlf_line_endings(tmp_path: Path) -> None:
    source = (
        "import os\r\n\r\nclass A:\r\n    def f(self):\r\n        return 1\r\n\r\n"
        "def g():\r\n    pass\r\n"
    )
    write(tmp_path, "a.py", source)
    discovery = discover_nodes([tmp_path], root=tmp_path)
    nodes = by_qualname(discovery)
    assert [(n.start_line, n.end_line) for n in nodes.values()] == [(3, 5), (4, 5), (7, 8)]
    assert nodes["A.f"].text == "def f(self):\r\n        return 1"
    assert nodes["g"].start_byte == source.index("def g")
    assert discovery.nodes[0].end_line == 8
    assert_ranges_consistent(discovery, tmp_path)


def test_non_ascii_source_has_byte_ranges_and_text(tmp_path: Path) -> None:
    source = (
        'GREETING = "héllo wörld ✓"\n'
        "\n"
        "def grüße(名前):\n"
        '    return f"こんにちは {名前}"\n'
        "\n"
        "class Café:\n"
        "    def ñ(self): ...\n"
    )
    write(tmp_path, "a.py", source)
    discovery = discover_nodes([tmp_path], root=tmp_path)
    data = source.encode()
    nodes = by_qualname(discovery)
    assert set(nodes) == {"grüße", "Café", "Café.ñ"}
    greet = nodes["grüße"]
    assert greet.start_byte == data.index("def grüße".encode())
    assert greet.end_byte == data.index(b"\n\nclass")
    assert greet.text == 'def grüße(名前):\n    return f"こんにちは {名前}"'
    assert greet.id == "a.py::grüße"
    assert nodes["Café.ñ"].text == "def ñ(self): ..."
    assert discovery.nodes[0].end_byte == len(data)
    assert_ranges_consistent(discovery, tmp_path)


def test_byte_order_mark_belongs_to_no_node(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbfdef f():\n    pass\n"
    write(tmp_path, "a.py", data)
    file_node, function = discover_nodes([tmp_path], root=tmp_path).nodes
    assert (file_node.start_byte, file_node.end_byte) == (3, len(data))
    assert file_node.text == "def f():\n    pass\n"
    assert (function.start_byte, function.start_line, function.end_line) == (3, 1, 2)
    assert function.text == "def f():\n    pass"


# Walking ------------------------------------------------------------------------------------


def test_gitignore_files_are_honoured(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "# generated code\ngenerated/\n*_pb2.py\n")
    write(tmp_path, "main.py", "")
    write(tmp_path, "generated/api.py", "")
    write(tmp_path, "pkg/.gitignore", "local.py\n!keep_pb2.py\n")
    write(tmp_path, "pkg/service_pb2.py", "")
    write(tmp_path, "pkg/keep_pb2.py", "")
    write(tmp_path, "pkg/local.py", "")
    write(tmp_path, "pkg/sub/local.py", "")
    write(tmp_path, "other/local.py", "")

    discovery = discover_nodes([tmp_path], root=tmp_path)
    assert discovery.files == ["main.py", "other/local.py", "pkg/keep_pb2.py"]

    # The root's .gitignore still applies when only a subdirectory is asked for.
    assert discover_nodes([tmp_path / "pkg"], root=tmp_path).files == ["pkg/keep_pb2.py"]


def test_an_ignored_directory_asked_for_is_walked(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "generated/\n*.tmp.py\n")
    write(tmp_path, "generated/api.py", "")
    write(tmp_path, "generated/x.tmp.py", "")
    discovery = discover_nodes([tmp_path / "generated"], root=tmp_path)
    assert discovery.files == ["generated/api.py", "generated/x.tmp.py"]


def test_default_excludes(tmp_path: Path) -> None:
    for excluded in [
        ".venv/lib/site.py",
        "venv/x.py",
        "__pycache__/x.py",
        ".git/hooks/x.py",
        "build/lib/x.py",
        "dist/x.py",
        "node_modules/x.py",
        "remora.egg-info/x.py",
        ".tox/py311/x.py",
        ".remora_cache/x.py",
        "src/.mypy_cache/x.py",
        "lib/python3.11/site-packages/x.py",
    ]:
        write(tmp_path, excluded, "")
    write(tmp_path, "src/app.py", "")
    write(tmp_path, "src/app.pyi", "")
    write(tmp_path, "src/notes.txt", "")
    assert discover_nodes([tmp_path], root=tmp_path).files == ["src/app.py"]


def test_explicit_file_arguments_always_count(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "generated/\n")
    ignored = write(tmp_path, "generated/api.py", "def f(): pass\n")
    in_venv = write(tmp_path, ".venv/tool.py", "")
    script = write(tmp_path, "bin/run", "def main(): pass\n")
    discovery = discover_nodes([ignored, in_venv, script], root=tmp_path)
    assert discovery.files == [".venv/tool.py", "bin/run", "generated/api.py"]
    assert {node.id for node in definitions(discovery).values()} == {
        "bin/run::main",
        "generated/api.py::f",
    }


def test_overlapping_paths_give_each_file_once(tmp_path: Path) -> None:
    a = write(tmp_path, "pkg/a.py", "def f(): pass\n")
    discovery = discover_nodes([tmp_path, tmp_path / "pkg", a, a], root=tmp_path)
    assert discovery.files == ["pkg/a.py"]
    assert len(discovery.nodes) == 2


def test_files_outside_root_have_absolute_paths(tmp_path: Path) -> None:
    outside = write(tmp_path, "elsewhere/x.py", "def f(): pass\n")
    root = tmp_path / "project"
    root.mkdir()
    discovery = discover_nodes([outside], root=root)
    assert discovery.files == [outside.as_posix()]
    assert discovery.nodes[1].id == f"{outside.as_posix()}::f"


def test_root_defaults_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "pkg/a.py", "")
    monkeypatch.chdir(tmp_path)
    assert discover_nodes([Path("pkg")]).files == ["pkg/a.py"]


def test_results_are_sorted_by_file_then_start(tmp_path: Path) -> None:
    for name in ["b.py", "a.py", "sub/c.py", "a_b.py"]:
        write(tmp_path, name, "def z(): pass\ndef a(): pass\n")
    discovery = discover_nodes([tmp_path], root=tmp_path)
    assert discovery.files == sorted(discovery.files)
    keys = [(node.file, node.start_byte) for node in discovery.nodes]
    assert keys == sorted(keys)
    assert [node.type for node in discovery.nodes[:3]] == [
        NodeType.FILE,
        NodeType.FUNCTION,
        NodeType.FUNCTION,
    ]


def test_missing_path_raises(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(DiscoveryError, match="nope"):
        discover_nodes([tmp_path, missing], root=tmp_path)


def test_symlink_loops_do_not_hang(tmp_path: Path) -> None:
    write(tmp_path, "pkg/a.py", "def f(): pass\n")
    try:
        (tmp_path / "pkg" / "loop").symlink_to(tmp_path, target_is_directory=True)
        (tmp_path / "pkg" / "self").symlink_to(tmp_path / "pkg", target_is_directory=True)
        (tmp_path / "pkg" / "link.py").symlink_to(tmp_path / "pkg" / "a.py")
    except OSError:
        pytest.skip("symlinks are not available here")
    discovery = discover_nodes([tmp_path], root=tmp_path)
    # Symlinked directories are not followed; a symlinked file is a file like any other.
    assert discovery.files == ["pkg/a.py", "pkg/link.py"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_special_files_are_not_read(tmp_path: Path) -> None:
    write(tmp_path, "ok.py", "")
    os.mkfifo(tmp_path / "pipe.py")  # opening it to read would block forever
    assert discover_nodes([tmp_path], root=tmp_path).files == ["ok.py"]
    discovery = discover_nodes([tmp_path / "pipe.py"], root=tmp_path)
    assert discovery.files == []
    assert [warning.file for warning in discovery.warnings] == ["pipe.py"]


DISCOVER_AS_JSON = """
import json, sys
from pathlib import Path
from remora.discovery.discover import discover_nodes
found = discover_nodes([Path(sys.argv[1])], root=Path(sys.argv[1]))
print(json.dumps({"files": found.files, "warnings": [w.file for w in found.warnings]}))
"""


def without_root_file_access() -> list[str]:
    """A command prefix under which root obeys file permissions, as users do."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]


def test_unreadable_files_and_directories_give_warnings(tmp_path: Path) -> None:
    write(tmp_path, "ok.py", "")
    write(tmp_path, "locked/x.py", "")
    write(tmp_path, "secret.py", "").chmod(0)
    (tmp_path / "locked").chmod(0)
    try:
        done = subprocess.run(
            [*without_root_file_access(), sys.executable, "-c", DISCOVER_AS_JSON, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"files": ["ok.py"], "warnings": ["locked", "secret.py"]}


# Every statement that can hold a definition ---------------------------------------------------


EVERY_STATEMENT = """\
import contextlib

match command:
    case "go":
        def go(): pass
    case [x, *rest] if x:
        class Moved:
            def where(self): pass
    case _:
        @staticmethod
        def fallback(): pass

for item in items:
    def per_item(): pass
else:
    def after_loop(): pass

while waiting:
    class Waiting: pass
else:
    def done_waiting(): pass

try:
    def attempt(): pass
except* ValueError:
    def on_value_error(): pass
else:
    def no_error(): pass
finally:
    def always(): pass

try:
    pass
except (KeyError, IndexError) as error:
    def on_lookup_error(): pass

with contextlib.suppress(Exception), open("f") as handle:
    def inside_with(): pass

async def outer():
    async with lock:
        def locked(): pass
    async for chunk in stream:
        class Chunk:
            if True:
                def method_in_if(self): pass
            elif False:
                def method_in_elif(self): pass

if a:
    pass
elif b:
    def in_elif(): pass

class Decorated:
    @property
    @other
    def prop(self): pass

    class Nested:
        @dataclass
        class Deeper: pass

lambda_value = lambda: (yield)
"""


def test_definitions_in_every_kind_of_statement(tmp_path: Path) -> None:
    write(tmp_path, "a.py", EVERY_STATEMENT)
    discovery = discover_nodes([tmp_path], root=tmp_path)
    found = discovered_signatures(discovery, "a.py")
    assert found == ast_signatures(EVERY_STATEMENT.encode())
    assert len(found) == 24
    assert found[("outer.Chunk.method_in_if", "method", 46, 46)] == 1
    assert found[("fallback", "function", 10, 11)] == 1
    assert found[("Decorated.prop", "method", 56, 58)] == 1
    assert_ranges_consistent(discovery, tmp_path)


def test_the_walk_descends_into_every_statement_container_of_the_grammar() -> None:
    # A grammar upgrade that adds a statement or clause must be classified here: the walk that
    # replaces the query on error-free files only descends into STATEMENT_CONTAINERS.
    from tree_sitter import Language

    from remora.discovery.parse import STATEMENT_CONTAINERS, _language

    language: Language = _language()
    kinds = {
        str(language.node_kind_for_id(kind))
        for kind in range(language.node_kind_count)
        if language.node_kind_is_named(kind) and language.node_kind_is_visible(kind)
    }
    holds_no_statement = {
        "assert_statement",
        "break_statement",
        "continue_statement",
        "delete_statement",
        "exec_statement",
        "expression_statement",
        "for_in_clause",  # comprehensions
        "future_import_statement",
        "global_statement",
        "if_clause",  # comprehensions
        "import_from_statement",
        "import_statement",
        "nonlocal_statement",
        "pass_statement",
        "print_statement",
        "raise_statement",
        "return_statement",
        "type_alias_statement",
        "with_clause",  # the items of a with statement, not its body
    }
    suffixes = ("_statement", "_clause", "block", "definition", "module")
    statement_like = {kind for kind in kinds if kind.endswith(suffixes)}
    assert statement_like - STATEMENT_CONTAINERS - holds_no_statement == set()


# Parse cache --------------------------------------------------------------------------------


def cache_entries(cache: Path) -> list[Path]:
    return sorted((cache / "discovery").glob("*/*/*.json"))


def test_a_warm_cache_gives_the_same_nodes_without_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, cache = tmp_path / "project", tmp_path / "cache"
    write(project, "a.py", "class A:\n    def f(self):\n        pass\n")
    write(project, "pkg/b.py", "def g(): pass\n")
    write(project, "pkg/c.py", "def g(): pass\n")  # same bytes as b.py: one entry for both
    uncached = discover_nodes([project], root=project)
    cold = discover_nodes([project], root=project, cache_dir=cache)
    assert (cold.nodes, cold.files, cold.warnings) == (
        uncached.nodes,
        uncached.files,
        uncached.warnings,
    )
    assert len(cache_entries(cache)) == 2
    assert (
        (cache / "CACHEDIR.TAG")
        .read_text()
        .startswith("Signature: 8a477f597d28d172789f06886806bc55")
    )
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"

    def no_parsing(data: bytes) -> list[object]:
        raise AssertionError("parsed although cached")

    monkeypatch.setattr("remora.discovery.parse.find_definitions", no_parsing)
    warm = discover_nodes([project], root=project, cache_dir=cache)
    assert warm.nodes == uncached.nodes
    assert warm.cached_files == 3
    assert warm.warnings == []


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    project, cache = tmp_path / "project", tmp_path / "cache"
    write(project, "a.py", "def old(): pass\n")
    write(project, "b.py", "def same(): pass\n")
    discover_nodes([project], root=project, cache_dir=cache)
    stat = (project / "a.py").stat()
    write(project, "a.py", "def new(): pass\n")  # same size
    os.utime(project / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime
    found = discover_nodes([project], root=project, cache_dir=cache)
    assert [node.id for node in found.nodes] == [
        "a.py::<module>",
        "a.py::new",
        "b.py::<module>",
        "b.py::same",
    ]
    assert found.cached_files == 1


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"garbage",
        b"\xff\xfe not utf-8",
        "truncated",
        "other key",
        "wrong shape",
    ],
)
def test_a_damaged_cache_entry_is_ignored_and_rewritten(
    tmp_path: Path, damage: bytes | str
) -> None:
    from remora.discovery.cache import content_key, encode_entry

    project, cache = tmp_path / "project", tmp_path / "cache"
    source = "class A:\n    def f(self): pass\n"
    write(project, "a.py", source)
    expected = discover_nodes([project], root=project, cache_dir=cache)
    (entry,) = cache_entries(cache)
    good = entry.read_bytes()
    if damage == "truncated":
        entry.write_bytes(good[: len(good) // 2])
    elif damage == "other key":
        entry.write_bytes(encode_entry(content_key(b"other"), []))
    elif damage == "wrong shape":
        body = json.dumps({"key": content_key(source.encode()), "definitions": [[1, 2]]})
        entry.write_bytes(good.partition(b"\n")[0] + b"\n" + body.encode())
    else:
        assert isinstance(damage, bytes)
        entry.write_bytes(damage)
    again = discover_nodes([project], root=project, cache_dir=cache)
    assert again.nodes == expected.nodes
    assert again.cached_files == 0
    assert entry.read_bytes() == good  # rewritten
    assert discover_nodes([project], root=project, cache_dir=cache).cached_files == 1


def test_a_cache_that_cannot_be_written_gives_one_warning(tmp_path: Path) -> None:
    project = tmp_path / "project"
    for index in range(3):
        write(project, f"m{index}.py", f"def f{index}(): pass\n")
    not_a_directory = write(tmp_path, "cache", "a file where the cache should be")
    found = discover_nodes([project], root=project, cache_dir=not_a_directory)
    assert found.nodes == discover_nodes([project], root=project).nodes
    (warning,) = found.warnings
    assert warning.file == not_a_directory.as_posix()
    assert "parse cache not written" in warning.message


def test_entries_of_other_versions_are_removed(tmp_path: Path) -> None:
    project, cache = tmp_path / "project", tmp_path / "cache"
    write(project, "a.py", "def f(): pass\n")
    old = write(cache, "discovery/0123456789abcdef/ab/cdef.json", "from an older remora")
    discover_nodes([project], root=project, cache_dir=cache)
    assert not old.parent.parent.exists()
    assert len(cache_entries(cache)) == 1


def test_unused_entries_are_pruned_beyond_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("remora.discovery.cache.PRUNE_FLOOR", 3)
    project, cache = tmp_path / "project", tmp_path / "cache"
    for version in range(3):  # each edit leaves the previous entry behind
        write(project, "a.py", f"def f{version}(): pass\n")
        write(project, "b.py", f"def g{version}(): pass\n")
        discover_nodes([project], root=project, cache_dir=cache)
    # 6 entries written, more than max(3, 2 x 2 files): only this run's are kept.
    assert len(cache_entries(cache)) == 2
    assert discover_nodes([project], root=project, cache_dir=cache).cached_files == 2


CONCURRENT_DISCOVERY = """
import json, sys
from pathlib import Path
from remora.discovery.discover import discover_nodes
project, cache = Path(sys.argv[1]), Path(sys.argv[2])
for _ in range(3):
    found = discover_nodes([project], root=project, cache_dir=cache, workers=1)
print(json.dumps({"nodes": len(found.nodes), "warnings": [w.message for w in found.warnings]}))
"""


def test_concurrent_processes_share_a_cache(tmp_path: Path) -> None:
    project, cache = tmp_path / "project", tmp_path / "cache"
    for index in range(150):
        write(project, f"pkg/m{index}.py", f"class C{index}:\n    def m(self): pass\n" * 3)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_DISCOVERY, str(project), str(cache)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    for run, (stdout, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, stderr
        assert json.loads(stdout) == {"nodes": 150 * 7, "warnings": []}
    assert len(cache_entries(cache)) == 150
    assert list((cache / "discovery").glob("*/*/*.part")) == []  # no temporary file left
    warm = discover_nodes([project], root=project, cache_dir=cache)
    assert warm.cached_files == 150
    assert warm.nodes == discover_nodes([project], root=project).nodes
