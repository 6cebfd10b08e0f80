"""`remora train docstring --from-code` with the real model: does an adapter learnt from the
docstrings people wrote make the docstring agent write better ones on libraries it never saw?
Results: bench/results/train_from_code.json.

    python bench/train_from_code.py              # train (about 15 min), then the docstring
                                                 # benchmark without and with it (2 x 13 min)
    python bench/train_from_code.py --adapter DIR --baseline FILE   # reuse both
    python bench/train_from_code.py --quick      # 40 examples, inflection only: checks it runs

Training code: modules of the standard library of the Python running this (PSF licence; the
list is `MODULES`), copied to a temporary folder; nothing of the docstring benchmark's corpus
(inflection, humanize, semver) is trained on. Then `bench/docstring_quality.py` runs without
and with the adapter (same corpus, folds and settings) and the lift is reported. Goals (issue
"Agents that learn..."): +20 points of acceptable first lines (the benchmark's proxy:
content-word F1 >= 0.3 with the author's line), content-word F1 reported beside; 500 examples x 1
epoch <= 30 min on 2 cores (time and peak memory from the adapter's card).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from _common import Report, common_arguments, workdir

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
MODULES = """
abc argparse ast base64 bisect calendar cmd code codeop colorsys configparser contextlib
copy csv dataclasses difflib dis enum filecmp fileinput fnmatch fractions functools
genericpath getopt getpass gettext glob gzip hashlib heapq hmac imaplib inspect ipaddress
keyword linecache locale mailbox mimetypes netrc nntplib numbers operator optparse os
pathlib platform plistlib poplib posixpath pprint pydoc queue quopri random reprlib
rlcompleter runpy sched secrets selectors shelve shlex shutil site smtplib socketserver
sre_parse stat statistics string symtable sysconfig tabnanny tarfile tempfile textwrap
threading timeit tokenize trace traceback turtle typing uu uuid warnings wave weakref
webbrowser xdrlib zipapp zipfile zipimport _pydecimal decimal datetime
collections/__init__ email/utils html/__init__ json/decoder json/encoder logging/__init__
urllib/parse
"""


def training_code(folder: Path, quick: bool) -> Path:
    """The standard library modules, flat in one folder (one project), with the licence."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    code = folder / "stdlib"
    code.mkdir()
    names = MODULES.split()
    for name in names[:8] if quick else names:
        source = stdlib / f"{name}.py"
        if source.is_file():
            shutil.copy(source, code / (name.replace("/", "_") + ".py"))
    if (stdlib / "LICENSE.txt").is_file():
        shutil.copy(stdlib / "LICENSE.txt", code / "LICENSE.txt")
    return code


def train(code: Path, out: Path, max_examples: int) -> dict[str, Any]:
    return remora_train(
        ["--from-code", str(code), "--out", str(out), "--max-examples", str(max_examples),
         "--epochs", "1", "--held-out", "0.1"],
        out, timeout=3 * 3600,
    )  # fmt: skip


def remora_train(arguments: list[str], out: Path, timeout: float) -> dict[str, Any]:
    """`remora train docstring ARGUMENTS` (which write the adapter to `out`), its progress
    lines echoed; the adapter's card and the wall time."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "remora", "train", "docstring", *arguments],
            cwd=out.parent, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise SystemExit(f"remora train took over {timeout:.0f} s; stopped") from None
    said = [line for line in done.stderr.splitlines() if line.startswith("remora:")]
    for line in said:
        print(f"  {line}", flush=True)
    if done.returncode != 0:
        raise SystemExit(f"remora train failed ({done.returncode}): {done.stderr[-2000:]}")
    card = json.loads((out / "card.json").read_text())
    return {"wall_s": round(time.perf_counter() - started, 1), "said": said, "card": card}


def quality(adapter: Path | None, quick: bool) -> dict[str, Any]:
    """bench/docstring_quality.py's results, without or with the adapter."""
    command = [sys.executable, str(BENCH / "docstring_quality.py"), "--no-demo"]
    command += ["--quick"] if quick else []
    command += ["--adapter", str(adapter)] if adapter else []
    subprocess.run(command, check=True, timeout=3 * 3600)
    name = "docstring_quality" + ("_adapter" if adapter else "") + ".json"
    return dict(json.loads(((RESULTS / "quick" if quick else RESULTS) / name).read_text()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument("--adapter", type=Path, help="an adapter trained before (skip training)")
    parser.add_argument("--baseline", type=Path, help="docstring_quality.json of the same code")
    parser.add_argument("--max-examples", type=int, default=500)
    args = parser.parse_args()
    report = Report("train_from_code", args)
    with workdir("train-from-code") as folder:
        adapter = args.adapter
        if adapter is None:
            code = training_code(folder, args.quick)
            adapter = folder / "adapter"
            report.data["training"] = train(code, adapter, 40 if args.quick else args.max_examples)
        card = json.loads((adapter / "card.json").read_text())
        report.data["card"] = card
        before = (
            json.loads(args.baseline.read_text()) if args.baseline else quality(None, args.quick)
        )
        after = quality(adapter, args.quick)
    report.data["before"] = before["figures"]
    report.data["after"] = after["figures"]
    report.data["by_library"] = {"before": before["by_library"], "after": after["by_library"]}
    verdicts(report, card, before["figures"], after["figures"])
    report.save()
    return 0


def verdicts(
    report: Report, card: dict[str, Any], before: dict[str, Any], after: dict[str, Any]
) -> None:
    def share(figures: dict[str, Any]) -> str:
        return (
            f"{figures['acceptable_proxy']} of {figures['written']} written "
            f"({figures['acceptable_proxy_rate']:.0%}; {figures['written']} of "
            f"{figures['removed']} removed written, so {figures['acceptable_proxy']} of "
            f"{figures['removed']} documented acceptably), mean F1 {figures['mean_f1']}"
        )

    lift = 100 * (after["acceptable_proxy_rate"] - before["acceptable_proxy_rate"])
    report.verdict(
        "acceptable first lines +20 points with the adapter (proxy)",
        lift >= 20,
        f"{share(before)} -> {share(after)} ({lift:+.0f} points)",
    )
    data, training = card["data"], card["training"]
    per_500 = training["seconds"] * 500 / max(data["train_examples"], 1) / card["lora"]["epochs"]
    report.verdict(
        "500 examples x 1 epoch <= 30 min on 2 cores",
        per_500 <= 1800,
        f"{data['train_examples']} examples x {card['lora']['epochs']} epoch in "
        f"{training['seconds']:.0f} s ({per_500 / 60:.1f} min per 500), peak memory "
        f"{training['peak_memory_mb']:.0f} MB; {data['jobs']} documented definitions read, "
        f"{data['verified_jobs']} kept",
    )


if __name__ == "__main__":
    sys.exit(main())
