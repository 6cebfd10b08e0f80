"""Learning from the code you already have: an adapter trained on a project's own documented
code, then the docstring agent on the rest of that project. Results:
bench/results/train_on_project.json.

    python bench/train_on_project.py                 # 2 folds: train, draft; then the
                                                     # baseline (about 20 min)
    python bench/train_on_project.py --baseline FILE # a docstring_quality.json of this commit
    python bench/train_on_project.py --seed 1        # another training order
                                                     # (train_on_project_seed1.json)
    python bench/train_on_project.py --quick         # fold 0 only (about 8 min)

The docstring benchmark's corpus and folds (bench/docstring_quality.py: inflection, humanize,
semver, every function docstring in one of two folds). For each fold: the three libraries with
that fold's docstrings removed are what a user has, `remora train docstring --from-code` on
the three together (the other fold's function docstrings and the classes' are the examples;
nothing of the fold is in them: 33-37 examples, so `--min-examples 5`), then the agent drafts
the fold's docstrings with that adapter, exactly as `bench/docstring_quality.py --adapter` does
(`drafts: write`, private definitions included). The baseline is the same runs without an
adapter. Every draft written at the agent's threshold on either side goes to the results file
beside the author's line and the other side's draft, for a person to judge (bench/README.md has
the judgement); the proxy (content-word F1 >= 0.3) is reported too.
Goal (issue "Agents that learn..."): +20 points of acceptable first lines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import docstring_quality as quality
from _common import Report, common_arguments, git_commit, workdir
from train_from_code import remora_train

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
    return remora_train(
        ["--isolated", "--from-code", *map(str, code), "--out", str(out), "--epochs", str(EPOCHS),
         "--held-out", "0", "--min-examples", "5", "--seed", str(seed), "--no-score"],
        out, timeout=3600,
    )  # fmt: skip


def drafts(fold: int, adapter: Path | None) -> list[dict[str, Any]]:
    settings = argparse.Namespace(quick=False, adapter=adapter)
    rows = [row for lib in quality.LIBRARIES for row in quality.run_fold(lib, fold, settings)]
    quality.judge(rows)  # the proxy's figures per row, as the docstring benchmark has them
    return rows


def baseline(path: Path, folds: tuple[int, ...]) -> list[dict[str, Any]]:
    """The rows of a docstring_quality.json run without an adapter, on both folds as here."""
    document = json.loads(path.read_text())
    if document.get("adapter") or "--adapter" in str(document.get("command")):
        raise SystemExit(f"{path}: a run with an adapter; the baseline runs without one")
    rows = [r for r in document["rows"] if r.get("fold") in folds]
    wanted = {
        (lib, item["file"], item["qualname"])
        for lib in quality.LIBRARIES
        for fold in folds
        for i, item in enumerate(quality.documented(quality.CORPUS / lib))
        if i % 2 == fold
    }
    if {(r["library"], r["file"], r["qualname"]) for r in rows} != wanted:
        raise SystemExit(
            f"{path}: not every removed docstring of folds {folds} (run "
            "bench/docstring_quality.py --no-demo without --quick, --libraries or --folds)"
        )
    here, there = git_commit(), document.get("machine", {}).get("remora_commit")
    if here != there:
        print(f"warning: the baseline ran at {there}, this at {here}", file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument("--baseline", type=Path, help="docstring_quality.json (both folds, no "
                        "adapter) of the same code, instead of running the baseline")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="remora train --seed")
    args = parser.parse_args()
    report = Report("train_on_project" + (f"_seed{args.seed}" if args.seed else ""), args)
    threshold = quality.agent_threshold()
    folds = (0,) if args.quick else (0, 1)
    before = baseline(args.baseline, folds) if args.baseline else None
    after: list[dict[str, Any]] = []
    report.data["training"] = {}
    with workdir("train-on-project") as folder:
        for fold in folds:
            adapter = folder / f"adapter{fold}"
            trained = train(training_copy(folder, fold), adapter, args.seed)
            report.data["training"][f"fold {fold}"] = trained
            after += drafts(fold, adapter)
    if before is None:
        before = [row for fold in folds for row in drafts(fold, None)]
    key = {(r["library"], r["file"], r["qualname"]): r for r in before}
    report.data["before"] = quality.figures(before, threshold)
    report.data["after"] = quality.figures(after, threshold)

    def side(row: dict[str, Any], name: str) -> dict[str, Any]:
        return {f"{name}_{field}": row.get(field) for field in ("draft", "confidence", "f1")}

    def shown(row: dict[str, Any]) -> bool:
        return bool(row["written"] and row["confidence"] >= threshold)

    pairs = [(key[r["library"], r["file"], r["qualname"]], r) for r in after]
    report.data["drafts"] = [
        {
            "library": row["library"],
            "file": row["file"],
            "qualname": row["qualname"],
            "author": row["author"],
            **side(old, "before"),
            **side(row, "after"),
        }
        for old, row in pairs
        if shown(old) or shown(row)
    ]
    b, a = report.data["before"], report.data["after"]
    lift = 100 * (a["acceptable_proxy_rate"] - b["acceptable_proxy_rate"])
    report.verdict(
        "acceptable first lines +20 points with the project's own adapter (proxy; by hand in "
        "bench/README.md)",
        lift >= 20,
        f"{b['acceptable_proxy']} of {b['written']} written -> {a['acceptable_proxy']} of "
        f"{a['written']} ({round(lift) or 0:+d} points); written {b['written']} -> "
        f"{a['written']} of {a['removed']}; mean F1 {b['mean_f1']} -> {a['mean_f1']}",
    )
    report.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
