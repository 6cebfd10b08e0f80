"""Where a run's results go as they end: progress first (`ended`), then the filters, then the
report and the transcripts (`final`), except the results of agents whose files are checked
together, which wait for the suite check (analysis/suite.py)."""

from __future__ import annotations

from pathlib import Path

from remora.analysis.filters import ResultFilters
from remora.analysis.request import AnalysisHooks, AnalyzeRequest
from remora.analysis.setup import RunSetup
from remora.analysis.suite import awaits_check, check_suites, checked_agents
from remora.cache.store import ResultCache
from remora.events import Events
from remora.findings.results import JobResult
from remora.jobs.job import Job


class ResultRoutes:
    def __init__(
        self,
        request: AnalyzeRequest,
        run: RunSetup,
        jobs: list[Job],
        filters: ResultFilters,
        skip: dict[int, JobResult],
        hooks: AnalysisHooks,
        events: Events,
    ) -> None:
        self.request, self.run, self.jobs, self.filters = request, run, jobs, filters
        self.skip, self.hooks, self.events = skip, hooks, events
        self.together = checked_agents(run.agents)
        self.models = {agent.name: agent.model for agent in run.agents}
        self.cached = 0
        """Jobs answered from the cache (known once the orchestrator looked them up)."""

    def planned(self, pending: int, from_cache: int) -> None:
        self.cached = from_cache
        self.events.emit(
            "run_started",
            paths=[str(path) for path in self.request.paths],
            agents=[agent.name for agent in self.run.agents],
            jobs=len(self.jobs),
            cached=from_cache,
            concurrency=self.run.configured.concurrency,
        )
        jobs = dict.fromkeys((agent.name for agent in self.run.agents), 0)
        for agent, _ in self.jobs:
            jobs[agent.name] += 1
        self.hooks.planned(jobs)
        for result in self.skip.values():  # decided before the run: they count as ended at once
            self.hooks.ended(result)

    def ended(self, result: JobResult) -> None:
        self.hooks.ended(result)
        self.finished(result)

    def finished(self, result: JobResult) -> None:
        self.filters.apply(result)
        if not awaits_check(result, self.together):  # else final after the suite check
            self.final(result)

    def final(self, result: JobResult) -> None:
        if self.run.recorder is not None:
            temperature = self.run.configured.runner.temperature
            self.run.recorder.write(
                result, model=self.models[result.agent], temperature=temperature
            )
        self.hooks.result(result)

    async def suite_check(
        self, results: list[JobResult], root: Path, cache: ResultCache | None
    ) -> list[JobResult]:
        """The suite check, a stage of its own: the results it held back, made final. A job
        whose file it dropped is stored as dropped (not done, with the reason): later runs do
        not write that file, nor spend a round of the check finding it again, until the
        function changes or `--retry-not-done` asks again. A file is only ever left out this
        way, never written on an earlier run's word."""
        held = [i for i, result in enumerate(results) if awaits_check(result, self.together)]
        checked = await check_suites(
            results,
            self.run.agents,
            root=root,
            commands=self.run.commands,
            events=self.events,
            hooks=self.hooks,
        )
        agents = {agent.name: agent for agent in self.run.agents}
        for index in held:
            if cache is not None and checked[index] is not results[index]:
                # A success answered from the cache and dropped now is stored as dropped too.
                dropped = checked[index].model_copy(update={"cached": False})
                cache.put(agents[checked[index].agent], dropped, root)
            self.final(checked[index])
        if cache is not None:
            cache.flush()
        return checked
