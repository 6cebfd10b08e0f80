"""Agents installed as Python packages, found through the `remora.agents` entry point group
(the way pytest finds its plugins): Remora's own bundled agents and any a third party ships.

An agent package is a folder holding `agent.yaml`, its tool scripts and, optionally, its host
library: the module `host` (host.py, or a host/ package) with `host_functions(context)`, and
`host_functions.pyi`, the stubs of what it offers. Only an installed package brings Python
code: an agent named by a path in a configuration gets the shared host functions only."""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from pydantic import BaseModel

from remora.errors import UserInputError

ENTRY_POINT_GROUP = "remora.agents"
DEFINITION_FILE = "agent.yaml"
HOST_STUBS_FILE = "host_functions.pyi"


class InstalledAgent(BaseModel):
    name: str
    package: str
    """The import name of the agent's package (the entry point's value)."""
    folder: Path
    distribution: str
    """The installed distribution that declares it (`remora` for the bundled agents)."""

    @property
    def definition(self) -> Path:
        return self.folder / DEFINITION_FILE

    @property
    def host_library(self) -> str | None:
        """The module of the agent's own host functions, if it has one."""
        own = (self.folder / "host.py").is_file() or (
            self.folder / "host" / "__init__.py"
        ).is_file()
        return f"{self.package}.host" if own else None

    def checked_host_library(self) -> str | None:
        """`host_library`, imported once to check it: it imports, has `host_functions`, and
        its stubs are there (what its functions are declared against). Its defects stop the
        run at load, named, not each job."""
        name = self.host_library
        if name is None:
            return None
        where = f"{self.package} ({self.distribution})"
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise UserInputError(
                f"{where}: its host library {name} does not import: {type(exc).__name__}: {exc}"
            ) from exc
        if not callable(getattr(module, "host_functions", None)):
            raise UserInputError(f"{where}: {name} has no function host_functions(context)")
        if not (self.folder / HOST_STUBS_FILE).is_file():
            raise UserInputError(
                f"{where}: {name} comes without {HOST_STUBS_FILE} beside agent.yaml, the stubs "
                "its functions are declared and type-checked against"
            )
        return name


@cache
def installed_agents() -> dict[str, InstalledAgent]:
    """Every installed agent by name, Remora's own first. A package that cannot be found or
    holds no agent.yaml, or a name two distributions declare, is the installation's error."""
    found: dict[str, InstalledAgent] = {}
    points = sorted(
        entry_points(group=ENTRY_POINT_GROUP),
        key=lambda point: (_distribution(point) != "remora", point.name),
    )
    for point in points:
        where = f"entry point {point.name} = {point.value} ({_distribution(point)})"
        try:
            spec = importlib.util.find_spec(point.value)
        except (ImportError, ValueError) as exc:
            raise UserInputError(
                f"{where}: cannot find the agent's package ({exc}); uninstall "
                f"{_distribution(point)} or fix its entry point"
            ) from exc
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations or not (Path(locations[0]) / DEFINITION_FILE).is_file():
            raise UserInputError(
                f"{where}: not a package folder holding {DEFINITION_FILE}; uninstall "
                f"{_distribution(point)} or fix its entry point"
            )
        if point.name in found:
            first = found[point.name]
            raise UserInputError(
                f"{where}: agent {point.name!r} is also installed by {first.distribution} "
                f"({first.package}); uninstall one of them"
            )
        found[point.name] = InstalledAgent(
            name=point.name,
            package=point.value,
            folder=Path(locations[0]).resolve(),
            distribution=_distribution(point),
        )
    return found


def installed_agent_at(definition: Path) -> InstalledAgent | None:
    """The installed agent whose agent.yaml is `definition`, if any: that file, not another
    YAML in its folder (only the package's own definition brings its host library)."""
    wanted = definition.resolve()
    return next((a for a in installed_agents().values() if a.definition == wanted), None)


def _distribution(point: object) -> str:
    dist = getattr(point, "dist", None)
    return str(dist.name) if dist is not None else "unknown"
