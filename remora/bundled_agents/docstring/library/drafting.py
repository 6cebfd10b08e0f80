"""The docstring agent's drafting (`draft_docstring`): every sentence a docstring's template
lacks, each a continuation by the job's own model of the function's source after a second copy
of its signature and an opening triple quote (which a base model continues well), after the
project's own documented definitions most like this one (its voice). Several drafts a sentence
are sampled and ranked (rank.py: grounded in the code, no boilerplate, no contradiction of the
code, agreement between drafts, and the reviewer: how likely the model finds the function's
code after each summary). What the code says is not asked of the model (facts: raised
exceptions, defaults, special methods).

Also `raises_sections`: a Raises section from the raise sites, in the style."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from remora.bundled_agents.docstring.library.prompt import summary_prompt
from remora.bundled_agents.docstring.library.rank import rank_drafts
from remora.bundled_agents.docstring.library.render import wrap_words

MIN_WORDS = 2
COPIED = ["def ", "class ", "Args:", "Returns:", "Parameters", ":param", "\\", ">>>", "==", "->"]
COPIED += ["self."]
KEYWORDS = ["return ", "raise ", "import ", "yield ", "if ", "for "]
QUOTES = ['"' * 3, "'" * 3]
MIN_GROUNDING = 0.6
"""A parameter or result sentence needs most of its words in the code."""

SENTENCE_ENDS = [". ", ".\n"]
"""Where a draft stops: `sentence` keeps the words before the first of these, so decoding on
after one (a batch of drafts runs until its longest row stops) is time for nothing. "? " and
"! " are left out: `sentence` keeps their mark, which the stop would drop."""
CompleteDrafts = Callable[[str, list[str] | None, int, list[float]], Awaitable[list[str]]]
ScoreText = Callable[[str, str], Awaitable[dict[str, Any]]]
Verdict = dict[str, Any]


def sentence(text: str) -> str:
    """The first sentence of a continuation, as one line ending in a full stop ("" if none):
    its first paragraph (a summary may start on the line after the quotes, and wrap), up to
    a section or an example."""
    kept: list[str] = []
    for line in str(text).split("\n"):
        line = line.strip()
        if not line:
            if kept:
                break
            continue
        if line.endswith(":") or line.startswith((">>>", ":param", ":return")):
            break
        kept.append(line)
    text = " ".join(" ".join(kept).split())
    for end in [". ", "! ", "? "]:
        at = text.find(end)
        if at != -1:
            text = text[: at + 1]
    text = text.strip(" -:*")
    if text and text[-1] not in ".!?":
        text += "."
    return text[0].upper() + text[1:] if text else ""


def refusal(text: str) -> str | None:
    """Why a drafted sentence cannot stand as prose, or None."""
    words = [word for word in text.replace(".", " ").split() if word]
    if len(words) < MIN_WORDS:
        return "is too short"
    for marker in COPIED + QUOTES:
        if marker in text:
            return "copies code (" + marker.strip() + ")"
    for keyword in KEYWORDS:  # a statement, not prose: "return round(price, 2)"
        if text.startswith(keyword):
            return "copies code (" + keyword.strip() + ")"
    plain = text.replace("(s)", "").replace("(es)", "")
    if "(" in plain or ":" in plain.rstrip("."):
        return "copies code (a call or a signature)"
    return None


def default_note(text: str, parameter: dict[str, Any]) -> str:
    default = parameter.get("default")
    if default is None or "default" in text.lower() or len(default) > 40 or "\n" in default:
        return text
    return f"{text} Defaults to ``{default}``."


def best(ranked: list[Verdict], what: str, problems: list[str]) -> Verdict | None:
    for verdict in ranked:
        if verdict["refused"] is None:
            return verdict
    if ranked:
        problems.append(f"{what}: the draft {ranked[0]['text'][:80]!r} {ranked[0]['refused']}")
    elif not problems:
        problems.append(what + ": no usable draft")
    return None


class Prompts:
    """The summary prompt (summary_prompt: the same text `remora train --from-code` learns
    from) and what the reviewer scores."""

    def __init__(
        self, source: str, check: dict[str, Any], examples: list[Any], text: str, end: int
    ) -> None:
        parts = summary_prompt(source, check, examples, text, end)
        self.head: str = parts["head"]
        self.examples: str = parts["examples"]
        self.header: str = parts["header"]
        self.body: str = parts["body"]

    def scored(self, summary: str | None) -> str:
        """What the reviewer reads before the body: the examples, then the header with this
        summary as its docstring (None: without a docstring)."""
        if summary is None:
            return self.examples + self.header.rstrip(" \t")
        return self.examples + self.header + QUOTES[0] + summary + QUOTES[0]


class Drafter:
    """One job's drafting: its model (`complete_drafts`, `score_text`) and options."""

    def __init__(
        self, complete_drafts: CompleteDrafts, score_text: ScoreText, options: dict[str, Any]
    ) -> None:
        self.complete_drafts, self.score_text, self.options = complete_drafts, score_text, options
        self.temperatures: list[float] = options.get("temperatures", [0.0, 0.7, 1.0])

    async def drafts(
        self,
        prompt: str,
        temperatures: list[float],
        problems: list[str],
        what: str,
        lead: str = "",
        stop: str = "\n\n",
    ) -> list[str]:
        """The usable drafts of one sentence, one per temperature (greedy first, then seeded
        samples, decoded together), each after `lead` (the words the prompt ends with) and
        ending at `stop` (a summary may start on the next line; an entry's sentence ends with
        its line); why the others were refused goes to `problems` when none is usable."""
        if not temperatures:
            return []
        try:
            asked = await self.complete_drafts(
                prompt, [*QUOTES, stop, *SENTENCE_ENDS], 40, temperatures
            )
        except Exception as error:
            said = str(error) or type(error).__name__
            problems.append(what + ": the model could not be asked (" + said + ")")
            return []
        kept, why = [], []
        for text in asked:
            text = sentence(text)
            if lead and text:
                text = lead + " " + (text[0].lower() + text[1:] if text[1:2].islower() else text)
            refused = refusal(text)
            if refused is None:
                kept.append(text)
            else:
                why.append(f"the draft {text[:80]!r} {refused}")
        if not kept and why:
            problems.append(what + ": " + why[0])
        return kept

    async def reviewer_gains(self, prompts: Prompts, texts: list[str]) -> list[float | None]:
        """Per draft: how much more likely the model finds the body after it than after no
        docstring, in nats per token (None when it could not be measured)."""
        if not self.options.get("reviewer", False) or not texts:
            return [None for _ in texts]
        try:
            base = await self.score_text(prompts.scored(None), prompts.body)
            known: dict[str, float] = {}
            for text in texts:  # the same draft twice is scored once
                if text not in known:
                    scored = await self.score_text(prompts.scored(text), prompts.body)
                    gain = (scored["logprob"] - base["logprob"]) / max(1, scored["tokens"])
                    known[text] = gain
            return [known[text] for text in texts]
        except Exception:
            return [None for _ in texts]

    async def sentence_for(
        self,
        prompt: str,
        what: str,
        facts: dict[str, Any],
        voice: Any,
        project: list[str],
        problems: list[str],
        doubts: list[str],
        lead: str = "",
    ) -> Verdict | None:
        """The best sound sentence for a parameter or the result: the project's own sentence
        for the name when it contradicts nothing and this code has most of its words (the same
        name may mean something else here), else the greedy draft when every word of it is in
        the code, else the best of the sampled drafts and the project's sentences with most of
        their words in the code (None, with the reason in `problems`; a sound draft with too
        few of its words in the code is returned, and why goes to `doubts`: the docstring is
        then withheld, the draft shown)."""
        if project:
            ranked = rank_drafts([], facts, what, [], voice, [], project)
            if ranked and ranked[0]["refused"] is None and ranked[0]["grounding"] >= 0.66:
                return ranked[0]
        why: list[str] = []
        temperatures = self.temperatures
        texts = await self.drafts(prompt, temperatures[:1], why, what, lead, "\n")
        ranked = rank_drafts(texts, facts, what, [], voice, [], [])
        if ranked and ranked[0]["refused"] is None and ranked[0]["grounding"] >= 0.99:
            return ranked[0]
        texts = texts + await self.drafts(prompt, temperatures[1:], why, what, lead, "\n")
        ranked = rank_drafts(texts, facts, what, [], voice, [], project)
        if not ranked:
            problems.extend(why[-1:])
        chosen = best(ranked, what, problems)
        if chosen is not None and chosen["grounding"] < MIN_GROUNDING:
            doubts.append(f"{what}: {chosen['text'][:80]!r} says things the code does not")
        return chosen

    async def fill(
        self,
        template: dict[str, Any],
        needs: dict[str, Any],
        check: dict[str, Any],
        facts: dict[str, Any],
        found: dict[str, Any],
        prompts: Prompts,
    ) -> dict[str, Any]:
        """Every sentence the template lacks, drafted into it: the template, the problems
        (none: all drafted; drafting stops at the first sentence without a sound draft, as the
        docstring is then neither written nor suggested: on rich 13.9.4, `Style`'s attributes
        took 33 drafts, 19 of them after one had failed), the confidence of each sentence, the
        doubts, and the name of each sentence the model wrote (`drafted`: not taken from the
        code's facts or from the project's own sentence for a parameter of the same name)."""
        problems: list[str] = []
        confidence: list[float] = []
        doubts: list[str] = []
        drafted: list[str] = []
        done = {
            "template": template,
            "problems": problems,
            "confidence": confidence,
            "doubts": doubts,
            "drafted": drafted,
        }
        shown = [example["summary"] for example in found["examples"]]
        voice = found["voice"]
        if needs["summary"]:
            if facts["special"]:
                template["summary"] = facts["special"]
                confidence.append(1.0)
            else:
                texts = await self.drafts(prompts.head, self.temperatures, problems, "summary")
                gains = await self.reviewer_gains(prompts, texts)
                ranked = rank_drafts(texts, facts, "summary", shown, voice, gains, [])
                chosen = best(ranked, "summary", problems)
                template["summary"] = chosen["text"] if chosen else ""
                confidence.append(chosen["score"] if chosen else 0.0)
                drafted.append("summary")
        if problems:
            return done
        known = prompts.head + (template["summary"] or "")  # a docstring may open with fields
        indent = check["indent"]
        for entry in template["parameters"]:
            if entry["description"] is not None:
                continue
            name = str(entry["name"]).lstrip("*")
            parameter = facts["parameters"].get(name, {})
            project = [item["text"] for item in found["parameters"].get(name, [])]
            # The annotation in the entry, as Google style with types writes it: the model
            # then goes on with a description instead of writing the type.
            typed = " (" + parameter["annotation"] + ")" if parameter.get("annotation") else ""
            entry_line = indent + "    " + entry["name"] + typed + ":"
            prompt = known + "\n\n" + indent + "Args:\n" + entry_line
            what = "parameter " + name
            chosen = await self.sentence_for(prompt, what, facts, voice, project, problems, doubts)
            if problems:  # one sentence without a sound draft withholds the whole docstring
                return done
            if chosen:
                entry["description"] = default_note(chosen["text"], parameter)
                confidence.append(chosen["score"])
                if chosen["text"] not in project:
                    drafted.append(what)
        for section in template["sections"]:
            # A class's attributes pydoclint asks for (DOC601/DOC603): one sentence each.
            for entry in section.get("entries") or []:
                if entry["description"] is not None:
                    continue
                name = str(entry["name"]).lstrip("*")
                prompt = known + "\n\n" + indent + section["title"] + ":\n" + indent + "    "
                what = "attribute " + name
                chosen = await self.sentence_for(
                    prompt + name + ":", what, facts, voice, [], problems, doubts
                )
                if problems:
                    return done
                if chosen:
                    entry["description"] = chosen["text"]
                    confidence.append(chosen["score"])
                    drafted.append(what)
        for key in ("returns", "yields"):
            item = template[key]
            if item is None or item["description"] is not None:
                continue
            title = "Returns" if key == "returns" else "Yields"
            # "The" keeps the continuation a description of the value, not a type or a name.
            prompt = known + "\n\n" + indent + title + ":\n" + indent + "    The"
            chosen = await self.sentence_for(prompt, key, facts, voice, [], problems, doubts, "The")
            if chosen:
                item["description"] = chosen["text"]
                confidence.append(chosen["score"])
                drafted.append(key)
        return done


def raises_sections(
    facts: dict[str, Any] | None, check: dict[str, Any], template: dict[str, Any], width: int
) -> list[dict[str, str]]:
    """Raises from the raise sites, in the style: what the code raises, said by its message."""
    style = template["style"]
    if template["sections"] or check["status"] != "missing":
        return []
    if facts is None:
        raise TypeError("raises_sections: no definition's facts (code_facts gave None)")
    entries, fields = [], []
    column = len(check["indent"]) + 4
    room = width - column
    for item in facts["raises"]:
        if not item["description"]:
            continue
        name, text = item["name"], item["description"]
        if style == "google":
            entries.append(wrap_words(text, room, name + ": ", "    "))
        elif style == "numpy":
            entries.append(name + "\n" + wrap_words(text, room, "    ", "    "))
        else:
            body = wrap_words(text, room, "", "    ")
            fields.append({"title": "raises " + name, "body": body})
    if entries:
        return [{"title": "Raises", "body": "\n".join(entries)}]
    return fields
