"""What a run needs before it plans: its agents, the engine, the project's Python and the
command settings that run it, the cache folder and the transcript writer; each checked at once
(an agent's unmet requirement, an unusable cache folder), before any work."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from remora.agents.definition import Agent
from remora.agents.registry import select_agents
from remora.analysis.engine import EngineChoice, choose_engine
from remora.analysis.request import AnalysisHooks, AnalyzeRequest
from remora.analysis.requirements import check_requirements
from remora.cache.folder import cache_dir_problem, cache_location
from remora.cache.store import ResultCache
from remora.config.loading import LoadedSettings
from remora.config.settings import CommandSettings, RemoraSettings
from remora.errors import RunFailed, UserInputError
from remora.jobs.transcripts import TranscriptWriter
from remora.sandbox.interpreter import project_commands


@dataclass(frozen=True)
class RunSetup:
    choice: EngineChoice
    agents: list[Agent]
    commands: CommandSettings
    """The command settings with the project's Python."""
    settings: RemoraSettings
    """What the jobs run under: the engine's settings with those commands."""
    configured: RemoraSettings
    """The settings as loaded (the run_started event and the transcripts name these)."""
    cache_folder: Path | None
    recorder: TranscriptWriter | None

    def open_cache(self, request: AnalyzeRequest, hooks: AnalysisHooks) -> ResultCache | None:
        if self.cache_folder is None:
            return None
        return ResultCache(
            self.cache_folder,
            self.settings,
            self.configured.cache_max_mb,
            warn=hooks.warn,
            retry_not_done=request.retry_not_done,
        )


def prepare(request: AnalyzeRequest, loaded: LoadedSettings, hooks: AnalysisHooks) -> RunSetup:
    """Bad input raises `UserInputError`; an unusable cache folder `RunFailed`."""
    settings = loaded.settings
    choice = choose_engine(loaded)
    agents = select_agents(
        loaded,
        list(request.agents) or None,
        model=choice.model_name,
        options={"unsafe_fixes": True} if request.unsafe_fixes else None,
    )
    if not agents:
        raise UserInputError(
            "no agents enabled; enable one in remora.yaml or name one with --agents"
        )
    python, commands = project_commands(
        settings.sandbox.commands,
        request.root,
        trusted_project=loaded.project_trusted is not None,
    )
    check_requirements(agents, commands)
    if choice.description:
        hooks.say(choice.description)
    if any(agent.definition.requires.python_modules for agent in agents):
        hooks.say(f"project Python: {python.path} ({python.why})")
    run_settings = choice.settings.model_copy(
        update={"sandbox": choice.settings.sandbox.model_copy(update={"commands": commands})}
    )
    use_cache = request.use_cache and request.record is None
    cache_folder = cache_location(loaded) if use_cache else None
    recorder = TranscriptWriter(request.record) if request.record is not None else None
    if cache_folder is not None and (problem := cache_dir_problem(cache_folder)):
        raise RunFailed(problem)  # before any work, not on the first write
    return RunSetup(choice, agents, commands, run_settings, settings, cache_folder, recorder)
