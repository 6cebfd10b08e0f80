"""`--baseline FILE`: record today's findings once, then report only new ones.

Findings are matched by fingerprint (`remora.findings.fingerprint`: agent, rule, qualified name, the
finding's line and its neighbours), so a baselined finding stays baselined when its code moves
or the file is edited elsewhere. A baseline records which fingerprint version it holds; one
recorded by an older Remora is matched with that version's fingerprints.
"""

from __future__ import annotations

import json
from pathlib import Path

from remora import __version__
from remora.edits.atomic import write_text_atomic
from remora.errors import UserInputError
from remora.findings.fingerprint import (
    FINGERPRINT_VERSION,
    FINGERPRINTS,
    Fingerprint,
    finding_fingerprint,
)
from remora.findings.results import JobResult


class Baseline:
    def __init__(
        self, known: set[str] | None, fingerprint: Fingerprint = finding_fingerprint
    ) -> None:
        self.known = known
        """None: the file does not exist yet, so this run records it."""
        self.fingerprint = fingerprint
        """The fingerprint version the file was recorded with."""
        self.hidden = 0

    @classmethod
    def load(cls, path: Path) -> Baseline:
        if not path.exists():
            return cls(None)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            known = set(data["fingerprints"])
            version = data.get("fingerprint_version", 1)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UserInputError(
                f"--baseline {path}: not a Remora baseline ({exc}); delete it to record a new one"
            ) from exc
        if version not in FINGERPRINTS:
            raise UserInputError(
                f"--baseline {path}: recorded with fingerprint version {version!r}, which this "
                f"Remora ({__version__}) does not know (it knows "
                f"{', '.join(map(str, FINGERPRINTS))}); upgrade Remora, or delete the file to "
                "record a new baseline"
            )
        return cls(known, FINGERPRINTS[version])

    def filter(self, result: JobResult) -> None:
        """Drop findings the baseline knows (in place)."""
        if self.known is None:
            return
        kept = [f for f in result.findings if self.fingerprint(result, f) not in self.known]
        self.hidden += len(result.findings) - len(kept)
        result.findings = kept

    def report(self, path: Path, results: list[JobResult]) -> str | None:
        """Write the baseline if this run recorded it; what to tell the user, if anything."""
        if self.known is None:
            fingerprints = sorted({finding_fingerprint(r, f) for r in results for f in r.findings})
            document = {
                "remora": __version__,
                "fingerprint_version": FINGERPRINT_VERSION,
                "fingerprints": fingerprints,
            }
            write_text_atomic(path, json.dumps(document, indent=2) + "\n")
            for result in results:
                result.findings = []
            return (
                f"recorded {len(fingerprints)} findings in the baseline {path}; later runs "
                "report only new ones"
            )
        if self.hidden:
            return f"{self.hidden} findings hidden by the baseline {path}"
        return None
