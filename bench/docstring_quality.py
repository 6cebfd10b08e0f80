"""Docstring quality: Remora's docstring agent (embedded engine) on real open-source code whose
authors wrote good docstrings, with those docstrings removed by this benchmark.

    python bench/docstring_quality.py            # 3 libraries, 2 folds each (about 13 minutes)
    python bench/docstring_quality.py --quick    # inflection, one fold, 4 functions
    python bench/docstring_quality.py --libraries inflection --folds 0

Corpus (bench/corpus/docstring_quality, vendored unchanged with their licences): inflection
0.5.1 (MIT, plain prose docstrings), humanize 4.17.0 (MIT, Google style with types), semver 3.1.2
(BSD-3-Clause, Sphinx style; version.py and _types.py). Every function and method docstring of a
library is in one of two folds (alternately, in source order); a run removes one fold's
docstrings and asks `remora analyze LIB --agents docstring --engine local --no-cache` (the
library's style, private definitions included) to document them, with the other fold's
docstrings in place, as in a partly documented project. `--without-project-docstrings` removes
every function docstring at once instead (the bundled examples stand in).

The agent runs with drafts=write (by default it writes no draft: every draft is a suggestion)
and min_confidence=0, so every draft that passes its hard checks is written and
its confidence is in the report; the figures at the agent's own threshold (agents/docstring/
agent.yaml's min_confidence, or --threshold) count only drafts at or above it, which is what a
run with that threshold writes (drafting is seeded: the same drafts come out). A sweep over
thresholds is in the results file.

Per written docstring: its first line beside the author's first sentence: content-word F1
(stems) and ROUGE-L; "acceptable by proxy" when the F1 is >= 0.3; whether it opens with
boilerplate ("This function...", "is used to"); whether a parameter sentence contradicts the
annotation or the default (this file's own check, `contradictions`). 20 written drafts, chosen by
a seeded shuffle, go to the results file for a person to judge (bench/README.md has the table).
Then the README's demo, timed: `remora analyze . --agents docstring --engine local --no-cache`
in a copy of examples/demo.

Goals (issue "Docstrings a reviewer keeps"): >= 80 % of written first lines acceptable (judged by
hand; the proxy must agree), no boilerplate openings, no contradicting parameter sentence, >= 60 %
of the removed docstrings written, the demo <= 3 minutes.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import REPO, Report, common_arguments, workdir

sys.path.insert(0, str(REPO))
from remora.bundled_agents.docstring.library.context import summary_of
from remora.bundled_agents.docstring.library.rank import f1, rouge_l

CORPUS = REPO / "bench" / "corpus" / "docstring_quality"
LIBRARIES = {"inflection": "google", "humanize": "google", "semver": "sphinx"}
PROXY_F1 = 0.3
SAMPLE = 20
THRESHOLDS = [0.0, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7]
BOILERPLATE = re.compile(r"^(this|the)\s+(\w+\s+)?(function|method|class)\b|\bis used to\b", re.I)
KINDS = {
    "mapping": re.compile(r"\b(dict|dictionary|mapping)\b", re.I),
    "sequence": re.compile(r"\b(list|tuple|array|sequence)\b", re.I),
    "string": re.compile(r"\b(string|str)\b", re.I),
    "number": re.compile(r"\b(integer|int|float|number)\b", re.I),
    "boolean": re.compile(r"\b(boolean|bool|true|false)\b", re.I),
}
TYPE_KINDS = {
    "dict": "mapping",
    "Mapping": "mapping",
    "list": "sequence",
    "tuple": "sequence",
    "Sequence": "sequence",
    "str": "string",
    "int": "number",
    "float": "number",
    "bool": "boolean",
}


def documented(root: Path) -> list[dict[str, Any]]:
    """Every function and method with a docstring, in source order per file."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, qualname in _functions(tree, ""):
            doc = ast.get_docstring(node)
            if doc:
                found.append(
                    {
                        "file": str(path.relative_to(root)),
                        "qualname": qualname,
                        "line": node.lineno,
                        "author": summary_of(doc),
                        "parameters": _parameters(node),
                    }
                )
    return found


def _functions(tree: ast.AST, prefix: str) -> list[tuple[Any, str]]:
    found: list[tuple[Any, str]] = []
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((node, prefix + node.name))
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, prefix + node.name + ".")
    return found


def _parameters(node: Any) -> dict[str, dict[str, str | None]]:
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [
        *zip(positional, defaults, strict=True),
        *zip(args.kwonlyargs, args.kw_defaults, strict=True),
    ]
    return {
        arg.arg: {
            "annotation": ast.unparse(arg.annotation) if arg.annotation else None,
            "default": ast.unparse(default) if default is not None else None,
        }
        for arg, default in pairs
    }


def strip_docstrings(root: Path, chosen: list[dict[str, Any]]) -> None:
    """Remove the chosen functions' docstrings (their lines; `pass` if nothing is left)."""
    by_file: dict[str, set[tuple[str, int]]] = {}
    for item in chosen:
        by_file.setdefault(item["file"], set()).add((item["qualname"], item["line"]))
    for name, wanted in by_file.items():
        path = root / name
        lines = path.read_text(encoding="utf-8").split("\n")
        cuts = []
        for node, qualname in _functions(ast.parse("\n".join(lines)), ""):
            if (qualname, node.lineno) in wanted:
                statement = node.body[0]
                cuts.append((statement.lineno, statement.end_lineno, len(node.body) == 1))
        for start, end, alone in sorted(cuts, reverse=True):
            indent = lines[start - 1][: len(lines[start - 1]) - len(lines[start - 1].lstrip())]
            lines[start - 1 : end] = [indent + "pass"] if alone else []
        path.write_text("\n".join(lines), encoding="utf-8")


def apply_diff(text: str, diff: str) -> str:
    """`text` with a unified diff of it applied."""
    lines, out, at = text.split("\n"), [], 0
    for hunk in re.split(r"^@@ ", diff, flags=re.M)[1:]:
        head, _, body = hunk.partition("\n")
        start = int(re.match(r"-(\d+)", head)[1])  # type: ignore[index]
        out += lines[at : start - 1]
        at = start - 1
        for row in body.split("\n"):
            if row.startswith("+"):
                out.append(row[1:])
            elif row.startswith("-"):
                at += 1
            elif row.startswith(" "):
                out.append(lines[at])
                at += 1
    return "\n".join(out + lines[at:])


def contradictions(docstring: str, parameters: dict[str, dict[str, str | None]]) -> list[str]:
    """Parameter sentences that call the value something its annotation or default is not."""
    from remora.bundled_agents.docstring.library.parse import parse_docstring

    found = []
    for entry in parse_docstring(docstring)["parameters"]:
        name = entry["name"].lstrip("*")
        facts = parameters.get(name)
        text = " ".join(str(entry["description"]).split()[:6])
        if not facts:
            continue
        kinds = _kinds(facts)
        claimed = [kind for kind, pattern in KINDS.items() if pattern.search(text)]
        wrong = [kind for kind in claimed if kinds and kind not in kinds and kind != "string"]
        if wrong:
            found.append(f"{name}: {entry['description']!r} (code: {sorted(kinds)})")
        said = re.search(r"Defaults to ``(.*?)``", str(entry["description"]))
        if said and facts["default"] is not None and not _same_value(said[1], facts["default"]):
            found.append(f"{name}: default {said[1]} is not {facts['default']}")
    return found


def _same_value(said: str, default: str) -> bool:
    try:
        return bool(ast.literal_eval(said) == ast.literal_eval(default))
    except (ValueError, SyntaxError):
        return " ".join(said.split()) == " ".join(default.split())


def _kinds(facts: dict[str, str | None]) -> set[str]:
    annotation, default = facts["annotation"], facts["default"]
    if annotation:
        names = re.findall(r"[A-Za-z_]\w*", annotation)
        kinds = {TYPE_KINDS[n] for n in names if n in TYPE_KINDS}
        return kinds if all(n in TYPE_KINDS or n in ("None", "Optional") for n in names) else set()
    if default and default != "None":
        try:
            value = ast.literal_eval(default)
        except (ValueError, SyntaxError):
            return set()
        kind = {
            dict: "mapping",
            list: "sequence",
            tuple: "sequence",
            str: "string",
            int: "number",
            float: "number",
            bool: "boolean",
        }.get(type(value))
        return {kind} if kind else set()
    return set()


def run_fold(lib: str, fold: int | None, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One analyze run with a fold's docstrings removed: a row per removed docstring."""
    items = documented(CORPUS / lib)
    chosen = items if fold is None else [it for i, it in enumerate(items) if i % 2 == fold]
    if args.quick:
        chosen = chosen[:4]
    with workdir("docstring-quality") as tmp:
        project = tmp / lib
        shutil.copytree(CORPUS / lib, project, ignore=shutil.ignore_patterns("__pycache__"))
        strip_docstrings(project, chosen)
        originals = {
            p: (project / p).read_text(encoding="utf-8") for p in {c["file"] for c in chosen}
        }
        report = tmp / "report.json"
        command = [
            sys.executable,
            "-m",
            "remora",
            "analyze",
            "--agents",
            "docstring",
            "--engine",
            "local",
            "--no-cache",
            "--format",
            "json",
            "-o",
            str(report),
            "-c",
            f"agents.docstring.options.style={LIBRARIES[lib]}",
            "-c",
            "agents.docstring.options.include_private=true",
            "-c",
            "agents.docstring.options.min_confidence=0",
            "-c",
            "agents.docstring.options.drafts=write",
            *(["-c", f"agents.docstring.adapter={args.adapter.resolve()}"] if args.adapter else []),
            *sorted(originals),
        ]
        started = time.monotonic()
        ran = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=3600)
        seconds = time.monotonic() - started
        if not report.is_file():
            raise SystemExit(f"analyze failed ({ran.returncode}): {ran.stderr[-2000:]}")
        results = json.loads(report.read_text())["results"]
    rows = []
    # A property's getter and setter share a qualified name: the first (the getter, which
    # carries the docstring) is the one the author documented.
    jobs: dict[tuple[str, str], dict[str, Any]] = {}
    for job in sorted(results, key=lambda r: r["node"]["start_line"]):
        jobs.setdefault((job["node"]["file"], job["node"]["qualified_name"]), job)
    for item in chosen:
        job = jobs.get((item["file"], item["qualname"]))
        row = {
            **item,
            "library": lib,
            "fold": fold,
            "written": False,
            "confidence": None,
            "draft": None,
            "docstring": None,
            "status": job["status"] if job else "no job",
            "why": "" if job else "no job",
        }
        if job and job["changes"]:
            new = apply_diff(originals[item["file"]], job["changes"][0]["diff"])
            docstring = next(
                (
                    ast.get_docstring(n)
                    for n, q in _functions(ast.parse(new), "")
                    if q == item["qualname"] and ast.get_docstring(n)
                ),
                None,
            )
            score = re.search(r"confidence (\d\.\d+)", job["summary"])
            row.update(
                written=docstring is not None,
                docstring=docstring,
                draft=summary_of(docstring) if docstring else None,
                confidence=float(score[1]) if score else 1.0,
            )
        elif job:
            row["why"] = (job.get("error") or {}).get("message", job["summary"])[:300]
        rows.append(row)
    print(
        f"{lib} fold {fold}: {len(chosen)} removed, {sum(r['written'] for r in rows)} drafted, "
        f"{seconds:.0f} s",
        flush=True,
    )
    for row in rows:
        row["seconds_run"] = round(seconds, 1)
    return rows


def judge(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        if row["written"]:
            row["f1"] = round(f1(row["draft"], row["author"]), 3)
            row["rouge_l"] = round(rouge_l(row["draft"], row["author"]), 3)
            row["acceptable_proxy"] = row["f1"] >= PROXY_F1
            row["boilerplate"] = bool(BOILERPLATE.search(row["draft"]))
            row["contradictions"] = contradictions(row["docstring"], row["parameters"])


def figures(rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    kept = [r for r in rows if r["written"] and r["confidence"] >= threshold]
    n = len(kept) or 1
    return {
        "threshold": threshold,
        "removed": len(rows),
        "written": len(kept),
        "written_rate": round(len(kept) / (len(rows) or 1), 3),
        "acceptable_proxy": sum(r["acceptable_proxy"] for r in kept),
        "acceptable_proxy_rate": round(sum(r["acceptable_proxy"] for r in kept) / n, 3),
        "mean_f1": round(sum(r["f1"] for r in kept) / n, 3),
        "mean_rouge_l": round(sum(r["rouge_l"] for r in kept) / n, 3),
        "boilerplate": sum(r["boilerplate"] for r in kept),
        "contradicting": sum(bool(r["contradictions"]) for r in kept),
    }


def demo_seconds() -> tuple[float, int]:
    with workdir("docstring-demo") as tmp:
        shutil.copytree(
            REPO / "examples" / "demo",
            tmp / "d",
            ignore=shutil.ignore_patterns("__pycache__", ".remora_cache"),
        )
        started = time.monotonic()
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "remora",
                "analyze",
                ".",
                "--agents",
                "docstring",
                "--engine",
                "local",
                "--no-cache",
            ],
            cwd=tmp / "d",
            capture_output=True,
            text=True,
            timeout=1800,
        )
        return time.monotonic() - started, ran.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common_arguments(parser)
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    parser.add_argument("--folds", default="0,1")
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument("--without-project-docstrings", action="store_true")
    parser.add_argument("--no-demo", action="store_true")
    parser.add_argument(
        "--adapter",
        type=Path,
        metavar="DIR",
        help="run the agent with this adapter (e.g. from `remora train docstring --from-code`); "
        "results go to docstring_quality_adapter.json",
    )
    args = parser.parse_args()
    report = Report(
        "docstring_quality"
        + ("_bundled" if args.without_project_docstrings else "")
        + ("_adapter" if args.adapter else ""),
        args,
    )
    if args.adapter:
        report.data["adapter"] = json.loads((args.adapter / "card.json").read_text())
    threshold = args.threshold if args.threshold is not None else agent_threshold()
    libraries = ["inflection"] if args.quick else args.libraries.split(",")
    folds: list[int | None] = (
        [None] if args.without_project_docstrings else [int(f) for f in args.folds.split(",")]
    )
    if args.quick:
        folds = folds[:1]
    rows = [row for lib in libraries for fold in folds for row in run_fold(lib, fold, args)]
    judge(rows)
    at = figures(rows, threshold)
    report.data["figures"] = at
    report.data["sweep"] = [figures(rows, t) for t in THRESHOLDS]
    report.data["by_library"] = {
        lib: figures([r for r in rows if r["library"] == lib], threshold) for lib in libraries
    }
    written = [r for r in rows if r["written"] and r["confidence"] >= threshold]
    sample = random.Random(20261126).sample(written, min(SAMPLE, len(written)))
    report.data["sample"] = [
        {
            k: r[k]
            for k in (
                "library",
                "qualname",
                "author",
                "draft",
                "confidence",
                "f1",
                "rouge_l",
                "acceptable_proxy",
            )
        }
        for r in sample
    ]
    report.data["rows"] = rows
    report.verdict(
        ">= 60 % of the removed docstrings written",
        at["written_rate"] >= 0.6,
        f"{at['written']} of {at['removed']} ({at['written_rate']:.0%}) "
        f"at min_confidence {threshold}",
    )
    report.verdict(
        ">= 80 % of written first lines acceptable (proxy: content-word F1 >= 0.3; "
        "the 20 judged by hand in bench/README.md)",
        at["acceptable_proxy_rate"] >= 0.8,
        f"{at['acceptable_proxy']} of {at['written']} ({at['acceptable_proxy_rate']:.0%}); "
        f"mean F1 {at['mean_f1']}, mean ROUGE-L {at['mean_rouge_l']}",
    )
    report.verdict("no boilerplate openings", at["boilerplate"] == 0, str(at["boilerplate"]))
    report.verdict(
        "no parameter sentence contradicts the annotation or default",
        at["contradicting"] == 0,
        str(at["contradicting"]),
    )
    if not args.no_demo and not args.quick:
        seconds, code = demo_seconds()
        report.data["demo"] = {"seconds": round(seconds, 1), "exit_code": code}
        report.verdict(
            "the demo (--agents docstring) <= 3 minutes",
            seconds <= 180,
            f"{seconds:.0f} s, exit {code}",
        )
    report.save()


def agent_threshold() -> float:
    text = (REPO / "remora" / "bundled_agents" / "docstring" / "agent.yaml").read_text(
        encoding="utf-8"
    )
    match = re.search(r"^\s+min_confidence:\s*([\d.]+)", text, re.M)
    return float(match[1]) if match else 0.5


if __name__ == "__main__":
    main()
