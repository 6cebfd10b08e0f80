"""Learning from the code you already have: an adapter trained on a project's own documented
code, then the docstring agent on the rest of that project. Results:
bench/results/train_on_project.json.

    python bench/train_on_project.py                 # 2 folds: train, draft; then the
                                                     # baseline (about 20 min)
    python bench/train_on_project.py --baseline FILE # reuse docstring_quality.json
    python bench/train_on_project.py --seed 1        # another training order
    python bench/train_on_project.py --quick         # fold 0 only (about 8 min)

The docstring benchmark's corpus and folds (bench/docstring_quality.py: inflection, humanize,
semver, every function docstring in one of two folds). For each fold: the three libraries with
that fold's docstrings removed are what a user has, `remora train docstring --from-code` on
them (the other fold's docstrings, and the classes' and modules', are the examples; nothing of
the fold is in them), then the agent drafts the fold's docstrings with that adapter, exactly as
`bench/docstring_quality.py --adapter` does. The baseline is the same runs without an adapter.
Every draft on either side goes to the results file beside the author's line, for a person to
judge (bench/README.md has the judgement); the proxy (content-word F1 >= 0.3) is reported too.
Goal (issue "Agents that learn..."): +20 points of acceptable first lines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import docstring_quality as quality
from _common import Report, common_arguments, workdir

EPOCHS = 3
"""A project has tens of documented definitions, not hundreds: three passes over them."""


def training_copy(folder: Path, fold: int) -> list[Path]:
    """The libraries as a user with this fold undocumented has them."""
    copies = []
    for lib in quality.LIBRARIES:
        items = quality.documented(quality.CORPUS / lib)
        project = folder / f"fold{fold}" / lib
        shutil.copytree(quality.CORPUS / lib, project, ignore=shutil.ignore_patterns("__pycache__"))
        quality.strip_docstrings(project, [it for i, it in enumerate(items) if i % 2 == fold])
        copies.append(project)
    return copies


def train(code: list[Path], out: Path, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "remora", "train", "docstring", "--isolated", "--from-code",
         *map(str, code), "--out", str(out), "--epochs", str(EPOCHS), "--held-out", "0",
         "--min-examples", "5", "--seed", str(seed), "--no-score"],
        cwd=out.parent, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    said = [line for line in done.stderr.splitlines() if line.startswith("remora:")]
    for line in said:
        print(f"  {line}", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"remora train failed ({done.returncode}): {done.stderr[-2000:]}")
    card = json.loads((out / "card.json").read_text())
    return {"wall_s": round(time.perf_counter() - started, 1), "card": card}


def drafts(fold: int, adapter: Path | None) -> list[dict[str, Any]]:
    settings = argparse.Namespace(quick=False, adapter=adapter)
    rows = [row for lib in quality.LIBRARIES for row in quality.run_fold(lib, fold, settings)]
    quality.judge(rows)  # the proxy's figures per row, as the docstring benchmark has them
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument("--baseline", type=Path, help="docstring_quality.json (both folds) of "
                        "the same code, instead of running the baseline")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="remora train --seed")
    args = parser.parse_args()
    report = Report("train_on_project", args)
    threshold = quality.agent_threshold()
    after: list[dict[str, Any]] = []
    report.data["training"] = {}
    folds = (0,) if args.quick else (0, 1)
    with workdir("train-on-project") as folder:
        for fold in folds:
            adapter = folder / f"adapter{fold}"
            trained = train(training_copy(folder, fold), adapter, args.seed)
            report.data["training"][f"fold {fold}"] = trained
            after += drafts(fold, adapter)
    if args.baseline:
        before = [r for r in json.loads(args.baseline.read_text())["rows"] if r["fold"] in folds]
    else:
        before = [row for fold in folds for row in drafts(fold, None)]
    key = {(r["file"], r["qualname"]): r for r in before}
    report.data["before"] = quality.figures(before, threshold)
    report.data["after"] = quality.figures(after, threshold)

    def side(row: dict[str, Any], name: str) -> dict[str, Any]:
        return {f"{name}_{field}": row.get(field) for field in ("draft", "confidence", "f1")}

    report.data["drafts"] = [
        {
            "library": row["library"],
            "qualname": row["qualname"],
            "author": row["author"],
            **side(key[row["file"], row["qualname"]], "before"),
            **side(row, "after"),
        }
        for row in after
        if any(
            r["written"] and r["confidence"] >= threshold
            for r in (row, key[row["file"], row["qualname"]])
        )
    ]
    b, a = report.data["before"], report.data["after"]
    lift = 100 * (a["acceptable_proxy_rate"] - b["acceptable_proxy_rate"])
    report.verdict(
        "acceptable first lines +20 points with the project's own adapter (proxy; by hand in "
        "bench/README.md)",
        lift >= 20,
        f"{b['acceptable_proxy']} of {b['written']} written -> {a['acceptable_proxy']} of "
        f"{a['written']} ({lift:+.0f} points); written {b['written']} -> {a['written']} of "
        f"{a['removed']}; mean F1 {b['mean_f1']} -> {a['mean_f1']}",
    )
    report.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
