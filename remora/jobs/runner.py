"""The turn loop: one agent on one node, model and sandboxed tools taking turns until
`submit_result`, a tool's final result, the turn limit, the time limit, a model error or a
prompt too long for the model's context (that request refused, the job's verified work kept)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
from pydantic import ValidationError

from remora.agents.definition import Agent
from remora.agents.notes import model_note
from remora.agents.toolscript import SUBMIT_RESULT, Tool
from remora.agents.write_scope import scoped_changes, scoped_suggestion
from remora.config.settings import RunnerSettings
from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace
from remora.events import NO_EVENTS, JobEvents
from remora.findings.results import ErrorCode, Finding, JobError, JobResult, JobStatus
from remora.host.context import HostContext, injected_context
from remora.host.library import job_functions
from remora.jobs.endings import (
    JobEnd,
    JobEnded,
    JobEnding,
    ModelFailed,
    NotAsked,
    ToolFault,
    not_done_message,
)
from remora.jobs.profiles import ModelProfile, call_grammar
from remora.jobs.tool_calls import BadCall, check_call, model_content, record_findings
from remora.jobs.transcripts import NO_RECORDING, TranscriptRecorder
from remora.jobs.turn_reply import TurnReply
from remora.protocol.completion import (
    Completion,
    CompletionModel,
    CompletionRequest,
    DraftsRequest,
    complete_drafts,
)
from remora.protocol.messages import (
    ChatModel,
    ChatRequest,
    Message,
    ModelError,
    ModelReply,
    PromptTooLong,
    ToolCall,
    ToolChoice,
    tool_message,
)
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolOutcome, ToolSandbox

ModelSeat = Callable[[], Awaitable[None]]
"""Awaited before a job's first model request: returns once the job may ask the model (the
orchestrator's seats); the job keeps its seat to its end."""
REMINDER = "Reply with a function call: one of the tools, or submit_result when you are done."
FINAL_REMINDER = "This is the last turn: call submit_result now."


class JobRunner:
    def __init__(
        self,
        agent: Agent,
        node: Node,
        *,
        model: ChatModel,
        sandbox: ToolSandbox,
        commands: CommandRunner,
        workspace: Workspace,
        profile: ModelProfile,
        settings: RunnerSettings,
        events: JobEvents | None = None,
        record: bool = False,
        model_seat: ModelSeat | None = None,
    ) -> None:
        self.agent, self.node, self.model, self.sandbox = agent, node, model, sandbox
        self.model_seat = model_seat
        self.workspace, self.profile, self.settings = workspace, profile, settings
        self.faults: list[JobError] = []
        context = HostContext(
            workspace, node, commands, self.faults, self._complete, self._complete_drafts
        )
        self.host = job_functions(agent, context)
        self.tools = {tool.name: tool for tool in agent.tools}
        self.validators = {tool.name: tool.validator for tool in agent.tools}
        self.validators[SUBMIT_RESULT] = agent.submit_validator
        self.messages: list[Message] = []
        self.turns = 0
        self.repairs = 0
        self.findings: dict[tuple[object, ...], Finding] = {}
        self.seen_calls: set[tuple[str, str]] = set()
        self.verified: tuple[str, str] | None = None
        """The last outcome (name, Remora's summary) a tool verified that completes the job."""
        self.refusals: list[str] = []
        self.finished = False
        """A tool said nothing is left for the model to do: the job ends without its turn."""
        self.final_reason = self.final_words = ""
        self.not_possible = ""
        """Why a tool found nothing it could do for the node (its `not_possible`)."""
        self.suggested: dict[str, Any] = {}
        """The edit a tool proposed but did not make (`suggestion`), shown, never applied."""
        self.events = events or NO_EVENTS.for_job("", node.id, agent.name)
        self.replies = TurnReply(
            model, settings, agent.confidence, self.events, f"{node.id}\0{agent.name}"
        )
        self.use_grammar = profile.uses_grammar(settings.grammar)
        self.recorder = TranscriptRecorder() if record else NO_RECORDING
        """Every model request, rendered as the model saw it (`--record`)."""

    async def run(self) -> JobResult:
        """The job's status comes from what the tools verified, never from the model's words:
        `success` needs one of the agent's `done_when` outcomes, whoever ended the loop."""
        started = time.perf_counter()
        submitted: dict[str, Any] | None = None
        with anyio.move_on_after(self.settings.job_timeout) as deadline:
            try:
                submitted = await self._turn_loop()
                wanted, reason = self.agent.definition.done_when, self.final_reason
                message = not_done_message(wanted, submitted, reason, self.refusals)
                ending: JobEnding = JobEnded(ErrorCode.NOT_DONE, message)
            except JobEnding as ended:
                ending = ended
        if deadline.cancelled_caught:
            message = f"the job took longer than runner.job_timeout={self.settings.job_timeout}s"
            ending = JobEnded(ErrorCode.TIME_LIMIT, message)
        writes, options = self.agent.definition.writes, self.agent.options
        suggested = scoped_suggestion(writes, options, self.node, self.workspace, self.suggested)
        end = JobEnd(ending.status, ending.error, self.verified, ending.not_asked)
        status, error, outcome, summary = end.settled(
            suggested=self.final_words if suggested else "", not_possible=self.not_possible
        )
        changes, refused = scoped_changes(writes, options, self.node, self.workspace)
        if status is not JobStatus.SUCCESS:
            changes, refused = [], []
        if refused:
            summary += f"; {len(refused)} change{'s' if len(refused) > 1 else ''} refused: "
            summary += "; ".join(refused)[:300]
        return JobResult(
            node=self.node,
            agent=self.agent.name,
            status=status,
            summary=summary,
            outcome=outcome,
            note=model_note(submitted, self.agent),
            findings=list(self.findings.values()),
            changes=changes,
            refused_changes=refused,
            suggestions=suggested,
            submitted=submitted,
            turns=self.turns,
            usage=self.replies.usage,
            confidence=self.replies.confidence,
            resamples=self.replies.resamples,
            duration_s=time.perf_counter() - started,
            error=error,
            transcript=self.recorder.transcript(changes),
        )

    async def _turn_loop(self) -> dict[str, Any] | None:
        """The submitted result; None when a tool said the job is finished (`final`)."""
        self.messages = [
            {"role": "system", "content": self.agent.definition.system_prompt},
            *self.agent.example_messages,
            {"role": "user", "content": self.agent.render_context(self.node, self.workspace.root)},
        ]
        await self._observe_first()
        while not self._finished():
            self.turns += 1
            last_turn = self.turns >= self.agent.max_turns
            tools, tool_choice = self.profile.request_tools(self.agent, last_turn=last_turn)
            self.recorder.asking(self.messages, tools)
            reply = await self._ask(tools, tool_choice)
            self.messages.append(reply.as_message())
            if reply.tool_calls:
                offered = {schema["function"]["name"] for schema in tools}
                submitted, problems = await self._dispatch(reply.tool_calls, offered)
                self.recorder.answered(reply, problems)
                if submitted is not None:
                    return submitted
                if self._finished():
                    break
            else:
                problems = ["the reply contained no function call"]
                self.recorder.answered(reply, problems)
                next_is_last = self.turns + 1 >= self.agent.max_turns
                reminder = FINAL_REMINDER if next_is_last else REMINDER
                self.messages.append({"role": "user", "content": reminder})
            if last_turn:
                raise JobEnded(
                    ErrorCode.TURN_LIMIT,
                    f"no valid submit_result within {self.agent.max_turns} turns "
                    f"(last reply: {'; '.join(problems) or 'other tool calls'})",
                )
            if problems:
                self._count_repair(problems)
        return None

    async def _observe_first(self) -> None:
        """The agent's observations: calls the runner makes before the model's first turn, in
        the transcript as ordinary calls with their results (which also shows the model the
        call format). Their findings and outcomes count like any tool's."""
        calls = [
            ToolCall(id=f"observe_{index}", name=name, arguments="{}")
            for index, name in enumerate(self.agent.definition.observe)
        ]
        if not calls:
            return
        self.messages.append(ModelReply(tool_calls=calls).as_message())
        for call in calls:
            self.seen_calls.add((call.name, "{}"))  # the model repeating it is told so
            outcome = await self._run_tool(self.tools[call.name], {})
            self.messages.append(tool_message(call, model_content(outcome)))
            if self._finished():
                break

    async def _ask(self, tools: list[dict[str, Any]], tool_choice: ToolChoice) -> ModelReply:
        # The one place the turn loop asks the model: its errors become endings here. (A host
        # function's completion that fails reaches its script as an exception, a tool result.)
        try:
            return await self._request(tools, tool_choice)
        except PromptTooLong as too_long:
            self.turns -= 1  # the request was not made
            raise NotAsked(f"model not asked: {too_long}") from too_long
        except ModelError as exc:
            raise ModelFailed(exc.code, exc.message) from exc

    async def _seated(self) -> None:
        """Before every model request: the first one waits for the job's seat."""
        if self.model_seat is not None:
            await self.model_seat()

    async def _request(self, tools: list[dict[str, Any]], tool_choice: ToolChoice) -> ModelReply:
        await self._seated()
        return await self.replies.ask(
            ChatRequest(
                model=self.agent.model,
                messages=self.messages,
                tools=tools,
                tool_choice=tool_choice,
                max_tokens=self.settings.max_tokens,
                temperature=self.settings.temperature,
                grammar=(
                    call_grammar(tools, parallel=self.profile.parallel_calls)
                    if self.use_grammar
                    else None
                ),
                parallel_calls=self.profile.parallel_calls,
            ),
            self.turns,
        )

    async def _complete(self, request: CompletionRequest) -> Completion:
        """The `complete` and `score_text` host functions: the job's model continues (or
        scores) a text for a tool."""
        await self._seated()
        started = time.perf_counter()
        completion = await self._completion_model().complete_text(
            model=self.agent.model, request=request
        )
        self._count_completion(request.prompt, completion, started, text=request.score is None)
        return completion

    async def _complete_drafts(self, request: DraftsRequest) -> list[Completion]:
        """The `complete_drafts` host function: one continuation per temperature, decoded
        together where the model can (each counted as the request it stands for)."""
        await self._seated()
        started = time.perf_counter()
        count = partial(self._count_completion, request.prompt, started=started, text=True)
        return await complete_drafts(self._completion_model(), self.agent.model, request, count)

    def _completion_model(self) -> CompletionModel:
        if not isinstance(self.model, CompletionModel):
            raise RuntimeError("complete: this model server does not offer completions")
        return self.model

    def _count_completion(
        self, prompt: str, completion: Completion, started: float, *, text: bool
    ) -> None:
        if text:  # a score is no text the model wrote
            self.recorder.completion(prompt, completion.text)
        usage = self.replies.usage
        usage.prompt_tokens += completion.usage.prompt_tokens
        usage.completion_tokens += completion.usage.completion_tokens
        usage.requests += 1
        self.events.emit(
            "completion",
            latency_s=time.perf_counter() - started,
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
            payload=self.events.payload({"prompt": prompt, "text": completion.text}),
        )

    def _count_repair(self, problems: list[str]) -> None:
        self.repairs += 1
        if self.repairs > self.settings.max_repairs:
            raise JobEnded(
                ErrorCode.INVALID_MODEL_OUTPUT,
                f"{self.repairs} unusable model replies (runner.max_repairs="
                f"{self.settings.max_repairs}); last: {'; '.join(problems)}",
            )

    async def _dispatch(
        self, calls: list[ToolCall], offered: set[str]
    ) -> tuple[dict[str, Any] | None, list[str]]:
        """Validate every call, run the valid tool calls, append their results in call order.
        Returns the submitted result, if any, and the problems to repair."""
        outcomes: list[ToolOutcome | None] = [None] * len(calls)
        problems: list[str] = []
        submitted: dict[str, Any] | None = None
        runnable: list[tuple[int, Tool, dict[str, Any]]] = []
        for index, call in enumerate(calls):
            try:
                arguments = self._validate(call, offered)
            except BadCall as bad:
                problems.append(f"{call.name}: {bad}")
                outcomes[index] = ToolOutcome(ok=False, error=str(bad))
                self.events.emit("bad_call", tool=call.name[:80], problem=str(bad))
                continue
            if call.name == SUBMIT_RESULT:
                submitted = arguments
                outcomes[index] = ToolOutcome(ok=True, value="submitted")
            else:
                runnable.append((index, self.tools[call.name], arguments))

        # A job's calls run one after another, in call order: parallel calls often edit the same
        # file (two fixes to one function), and each must see the other's write. Concurrency
        # comes from running many jobs at once, not from inside one.
        for index, tool, arguments in runnable:
            outcomes[index] = await self._run_tool(tool, arguments)
        for call, outcome in zip(calls, outcomes, strict=True):
            assert outcome is not None
            self.messages.append(tool_message(call, model_content(outcome)))
        return submitted, problems

    def _validate(self, call: ToolCall, offered: set[str]) -> dict[str, Any]:
        return check_call(call, offered, self.validators, self.seen_calls)

    def _finished(self) -> bool:
        """A tool said nothing is left for the model to do (a method: it changes under
        awaits, which a type checker's narrowing of an attribute does not see)."""
        return self.finished

    def _observe(self, tool: Tool, outcome: ToolOutcome) -> None:
        """Record what a tool verified or refused; end the job on an environment fault."""
        if outcome.crashed:
            message = outcome.error or "the sandbox worker crashed"
            self.faults.append(JobError(code=ErrorCode.SANDBOX_CRASHED, message=message))
        if self.faults:
            raise ToolFault(self.faults[0])
        value = outcome.value if outcome.ok else {"problems": [outcome.error]}
        if not isinstance(value, dict):
            return
        name, summary = value.get("outcome"), value.get("summary")
        if isinstance(value.get("suggestion"), dict):
            self.suggested = value["suggestion"]
        if isinstance(name, str) and name in self.agent.definition.done_when:
            self.verified = (name, str(summary) if summary else f"{tool.name}: {name}")
        elif isinstance(value.get("problems"), list) and value["problems"]:
            self.refusals.append(f"{tool.name}: {'; '.join(map(str, value['problems']))}"[:300])
        if value.get("final") is True:  # nothing is left for the model to do
            self.finished = True
            if isinstance(value.get("not_possible"), str):
                self.not_possible = str(value["not_possible"])[:1000]
            problems = "; ".join(map(str, value.get("problems") or []))
            self.final_words = str(summary or value.get("reason") or problems or name)[:300]
            self.final_reason = f"{tool.name}: {self.final_words}"[:300]

    async def _run_tool(self, tool: Tool, arguments: dict[str, Any]) -> ToolOutcome:
        try:
            context = injected_context(tool, self.node, self.agent.options, self.workspace)
        except OSError as exc:  # e.g. the node's file was deleted while the run went on
            return ToolOutcome(ok=False, error=f"cannot prepare the tool's context: {exc}")
        inputs = tool.sandbox_inputs(arguments, context)
        self.events.emit("tool_call", tool=tool.name, payload=self.events.payload(arguments))
        outcome = await self.sandbox.run(tool, inputs, self.host, self.agent.tool_limits)
        self.events.emit(
            "tool_result",
            tool=tool.name,
            ok=outcome.ok,
            duration_s=outcome.duration_s,
            error=outcome.error,
            payload=self.events.payload(outcome.content()),
        )
        if outcome.ok and isinstance(outcome.value, dict) and "findings" in outcome.value:
            if outcome.value.get("replaces_findings") is True:
                self.findings.clear()  # e.g. after a fix: the tool reports what remains
            try:
                record_findings(self.findings, outcome.value["findings"], self.node)
            except (ValidationError, TypeError) as exc:
                outcome = ToolOutcome(ok=False, error=f"{tool.name} returned bad findings: {exc}")
        self._observe(tool, outcome)
        return outcome
