"""The veil-of-ignorance experiment as SimPy processes.

1. **Initial rating** (``rating_initial``, all agents at once): a 4-point Likert
   rating of every principle.
2. **Deliberation rounds** (``deliberation``, round r = 1, 2, ...). Each round,
   every agent first updates its private memory (all at once; ``memory`` phase),
   then the agents take turns (``speaking_order``): each states a private strategy,
   posts a public message and chooses a principle (and amount). The choices are
   matched in code under the decision rule. Without agreement, the moderator posts
   every agent's choice (``announce_choices``) and a new round starts, unless
   ``max_rounds`` rounds were held or ``timeout_s`` simulated seconds have passed
   since the first round began (checked between rounds).
3. **Final rating** (``rating_final``): the Likert rating again, after the talk.
4. **Interview** (``interview_question``, ``interview``): a feedback agent asks each
   agent a question about its final choice and its experience; the answers go to
   the agent-centric log.
5. **The veil lifts** (``veil``): see :mod:`.principles`.

Memory strategies (``memory``): with ``full`` an agent's prompts hold the whole
visible discussion and all its memory notes; with ``recent:K`` the last K
messages and the last K notes; with ``summary`` and ``decomposed`` the memory is
written by the LLM (one call, or three focused calls in sequence) from the old
memory and the messages since the last update, and it replaces the discussion in
later prompts, which then show only the current round's earlier messages.

Where a prompt would not fit the model's context window (:mod:`simcore.sim.fitting`),
its memory and discussion sections are trimmed: the oldest public messages go
first (the agent's memory strategy trims them), then the oldest memory notes.

Everything an agent saw and said is kept per agent and round in
``world.state["log"]``, in the seed's agent-centric layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from scenarios.veil_of_ignorance.config import FEEDBACK_AGENT, MODERATOR, VeilConfig
from scenarios.veil_of_ignorance.principles import (
    BY_ID,
    KEYS,
    LIKERT,
    PRINCIPLES,
    Choice,
    choice_from_key,
    detect_consensus,
    draw_classes,
    lift_veil,
)
from simcore.api import (
    FullMemory,
    LLMAgent,
    Message,
    RecentMemory,
    Reply,
    World,
    amount,
    decision_rule,
    likert,
    make_memory,
    option,
    parallel,
    render,
    speaking_order,
    text,
)

SITUATION = "## Your situation"
MEMORY_HEADER = "Your private memory:"
PUBLIC_HEADER = "Public discussion you can see:"
LLM_MEMORY = ("summary", "decomposed")
DECOMPOSED_STEPS = (
    ("positions", "Positions",
     "List each other member's latest position: the principle, the amount if any, and "
     "their main argument. One line per member."),
    ("dynamics", "Group",
     "Given those positions, where does the group agree and disagree, and what stands in "
     "the way of agreement? Two or three sentences."),
    ("plan", "Plan",
     "What should you aim for in the next round, and which principle and amount could "
     "you accept? Two or three sentences."),
)
INTERVIEWER_PERSONA = (
    "You interview members of a group after a deliberation about how a society should "
    "distribute income. Ask short, neutral, open questions."
)


def _rating(i: int) -> Any:
    """The Likert field of principle ``i`` (1-4), named in labelled lines by its label, key or number."""
    p = PRINCIPLES[i - 1]
    return likert(p.label, p.key, f"principle {i}", f"{i}", scale=LIKERT)


@dataclass(frozen=True, kw_only=True)
class Ratings:
    """A Likert rating of every principle (labels or scores 1-4), after the reasoning."""

    KIND: ClassVar[str] = "rating"
    reasoning: str | None = text(required=False)
    maximize_minimum: int = _rating(1)
    maximize_average: int = _rating(2)
    floor_constraint: int = _rating(3)
    range_constraint: int = _rating(4)

    def scores(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in KEYS}


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One deliberation turn; the constraint principles (3, 4) need an amount."""

    KIND: ClassVar[str] = "turn"
    SPOKEN: ClassVar[bool] = True  # said to the others: "you" in it are they, not this agent
    strategy: str | None = text(required=False)
    message: str = text("public message")
    principle: str = option(
        ("1", "2", "3", "4"), texts=[p.label for p in PRINCIPLES],
        synonyms=(("maximin", "1"), ("minimum", "1"), ("floor", "3"), ("range", "4"), *((p.key, str(p.id)) for p in PRINCIPLES)),
        prefix=("principle", "option", "#", "choice"), labels=("principle", "choice", "vote", "chosen principle"),
        integer=False,
    )
    constraint_amount: int | None = amount("amount", "constraint", "floor", "range", lo=1, integer=True, required=False)

    def __post_init__(self) -> None:
        if BY_ID[int(self.principle)].needs_amount and self.constraint_amount is None:
            raise ValueError(f"constraint_amount: principle {self.principle} needs an amount in dollars")

    def choice(self) -> Choice:
        """The choice this turn makes (amounts do not apply to principles 1 and 2)."""
        pid = int(self.principle)
        return Choice(pid, self.constraint_amount if BY_ID[pid].needs_amount else None)


@dataclass(frozen=True, kw_only=True)
class Interview:
    """An answer in the post-experiment interview."""

    KIND: ClassVar[str] = "interview"
    explanation: str = text("why", "final choice")
    experience: str | None = text("how i experienced the deliberation", required=False)


# -- prompts ---------------------------------------------------------------

def distribution_table(cfg: VeilConfig) -> str:
    """The distribution set as a text table, one line per class."""
    head = "class | " + " | ".join(d.name for d in cfg.distributions)
    rows = [
        f"{cls} | " + " | ".join(f"${d.incomes[i]:,}" for d in cfg.distributions)
        for i, cls in enumerate(cfg.classes)
    ]
    return "\n".join([head, *rows])


def persona(personality: str, cfg: VeilConfig) -> str:
    """System prompt: the agent's personality, then the shared situation."""
    n = cfg.n_agents
    odds = "each class is equally likely" if not cfg.class_weights else "with the probabilities " + ", ".join(
        f"{c} {w / sum(cfg.class_weights):.0%}" for c, w in zip(cfg.classes, cfg.class_weights)
    )
    principles = "\n".join(f"{p.id}. {p.label.capitalize()}: {p.description}" for p in PRINCIPLES)
    return (
        f"{personality}\n\n{SITUATION}\n"
        f"You are one of {n} members of a group that must agree on a principle for distributing "
        "income in the society you will live in. You do not know your future place in it: once "
        f"the group has decided, each member is assigned an income class by chance ({odds}). "
        "The principle the group agrees on picks the income distribution for everyone; if the "
        "group does not agree, a distribution is picked at random.\n\n"
        f"The principles:\n{principles}\n\n"
        f"The possible income distributions (yearly income per class):\n{distribution_table(cfg)}"
    )


def rule_text(spec: str) -> str:
    """The decision rule in words."""
    name, _, q = spec.partition(":")
    if name == "threshold":
        return f"a qualified majority: at least {float(q):.0%} must choose the same principle and amount"
    return {
        "unanimity": "unanimity: everyone must choose the same principle and amount",
        "majority": "majority: more than half must choose the same principle and amount",
        "plurality": "plurality: the most chosen principle and amount wins",
    }[name]


RATING_FORMAT = (
    "Rate how much you agree with each principle as the rule for your society, on this scale: "
    f"{', '.join(LIKERT)}.\nReply with JSON only: "
    + '{"reasoning": str, ' + ", ".join(f'"{k}": label' for k in KEYS) + "}"
)


def context(memory: str, history: str) -> str:
    """The memory and public-discussion sections of a prompt."""
    return (
        f"{MEMORY_HEADER}\n{memory or '(empty)'}\n\n"
        f"{PUBLIC_HEADER}\n{history or '(nothing new has been said)'}"
    )


def initial_rating_prompt() -> str:
    return f"The deliberation has not started yet.\n{RATING_FORMAT}"


TURN_FORMAT = (
    "State your strategy for this round (kept private), write your public message to the "
    "group, and choose the principle you support now. For principle 3 give the floor, for "
    "principle 4 the range, in dollars a year.\nReply with JSON only: "
    '{"strategy": str, "message": str, "principle": 1-4, "constraint_amount": dollars or null}'
)


def turn_prompt(cfg: VeilConfig, r: int, memory: str, history: str) -> str:
    return (
        f"Deliberation round {r} (at most {cfg.max_rounds}). The group decides by "
        f"{rule_text(cfg.decision_rule)}.\n\n{context(memory, history)}\n\n{TURN_FORMAT}"
    )


def memory_prompt(cfg: VeilConfig, r: int, memory: str, history: str, initial: str, step: str) -> str:
    """The prompt of one memory-update call (``step``: note, summary or a decomposed step)."""
    start = f"Deliberation round {r} is about to start."
    if initial:
        start += f" Your ratings before the deliberation: {initial}."
    if step == "note":
        task = (
            "Write your private memory note for this round: who supports what (with amounts), "
            "what has changed, and what matters for you. Plain text, a few lines."
        )
        return f"{start}\n\n{context(memory, history)}\n\n{task}"
    if step == "summary":
        task = (
            "Rewrite your memory as one concise summary that replaces the old one: each member's "
            "latest position (principle and amount), the state of the discussion, and your own "
            "aims. Plain text."
        )
        return f"{start}\n\n{context(memory, history)}\n\n{task}"
    instruction = next(text for key, _, text in DECOMPOSED_STEPS if key == step)
    return f"{start}\n\n{context(memory, history)}\n\n{instruction} Plain text."


def final_rating_prompt(rounds: int, outcome: str, memory: str, history: str) -> str:
    return (
        f"The deliberation has ended after {rounds} round(s). {outcome}\n\n"
        f"{context(memory, history)}\n\n{RATING_FORMAT}"
    )


def question_prompt(name: str, choice: str, outcome: str) -> str:
    return (
        f"Interview {name}. Its final choice was: {choice}. {outcome} Write one short question "
        f"that asks {name} to explain its final choice and how it experienced the deliberation."
    )


ANSWER_FORMAT = (
    "Answer honestly. Reply with JSON only: "
    '{"explanation": why you made your final choice, "experience": how you experienced the deliberation}'
)


def answer_prompt(question: str, memory: str, choice: str, outcome: str) -> str:
    return (
        f"The deliberation is over. Your final choice was: {choice}. {outcome}\n\n"
        f"{MEMORY_HEADER}\n{memory or '(empty)'}\n\n"
        f'An interviewer asks you: "{question}"\n{ANSWER_FORMAT}'
    )


def default_question(name: str) -> str:
    return f"{name}, why did you make your final choice, and how did you experience the deliberation?"


def outcome_text(agreed: Choice | None) -> str:
    if agreed is None:
        return "The group did not reach agreement, so a distribution will be picked at random."
    return f"The group agreed on: {agreed.describe()}."


# -- agents and memory -------------------------------------------------------

def build(world: World, cfg: VeilConfig) -> None:
    """Create the deliberating agents and the interviewer, and start the experiment."""
    shared = FullMemory() if cfg.memory in LLM_MEMORY else make_memory(cfg.memory)
    roster = cfg.roster()
    template = {a.name: a.personality_template for a in cfg.agents}
    log: dict[str, dict[str, Any]] = {}
    for spec in roster:
        agent = LLMAgent(
            world,
            spec.name,
            role="deliberator",
            persona=persona(spec.personality, cfg),
            model_name=spec.model or None,
            temperature=spec.temperature,
            max_output_tokens=cfg.max_output_tokens,
            memory=shared,
            params={"notes": [], "seen": 0},
        )
        log[spec.name] = {
            "overall": {
                "name": spec.name,
                "model": agent.model_name,
                "personality": spec.personality,
                "personality_template": template.get(spec.name) or None,
                "temperature": spec.temperature,
                "memory_strategy": cfg.memory,
                "max_output_tokens": cfg.max_output_tokens,
            }
        }
    LLMAgent(
        world,
        FEEDBACK_AGENT,
        role="feedback",
        persona=INTERVIEWER_PERSONA,
        model_name=cfg.feedback_model or cfg.default_model or None,
        temperature=cfg.temperature,
        max_output_tokens=min(cfg.max_output_tokens, 200),
    )
    world.state.update(names=[s.name for s in roster], log=log, decisions=[], ratings={})
    world.process(experiment(world, cfg))


def _notes(agent: LLMAgent, cfg: VeilConfig) -> list[tuple[int, str]]:
    """The memory notes that enter a prompt."""
    notes: list[tuple[int, str]] = agent.params["notes"]
    if cfg.memory in LLM_MEMORY:
        return notes[-1:]
    if isinstance(agent.memory, RecentMemory):
        return notes[-agent.memory.k :]
    return list(notes)


def _public(agent: LLMAgent, cfg: VeilConfig) -> list[Message]:
    """The public messages that enter a prompt (see the module docstring)."""
    if cfg.memory in LLM_MEMORY:
        return agent.visible()[agent.params["seen"] :]
    return list(agent.memory.select(agent.visible()))


def _render_notes(notes: list[tuple[int, str]]) -> str:
    return "\n".join(f"[round {r}] {text}" for r, text in notes)


def memory_view(agent: LLMAgent, cfg: VeilConfig) -> str:
    """The agent's private memory as it enters a prompt."""
    return _render_notes(_notes(agent, cfg))


def public_view(agent: LLMAgent, cfg: VeilConfig) -> str:
    """The public discussion as it enters a prompt (see the module docstring)."""
    return render(_public(agent, cfg))


def views_trim(agent: LLMAgent, cfg: VeilConfig, prompt: Callable[[str, str], str]) -> Callable[[int], str]:
    """``prompt(memory, history)`` with both sections within a token budget (an ask's ``trim``).

    The oldest public messages are dropped first, then the oldest memory notes. The
    sections are taken now, as the prompt is.
    """
    public = _public(agent, cfg)
    notes = _notes(agent, cfg)
    # The notes after the messages, so that trimming the oldest first takes messages first.
    items = [*public, *(Message(-1, 0.0, str(r), text) for r, text in notes)]

    def trimmed(budget: int) -> str:
        k = len(FullMemory().trim(items, budget))
        n_notes = min(k, len(notes))
        kept = public[len(public) - (k - n_notes):] if k > n_notes else []
        return prompt(_render_notes(notes[len(notes) - n_notes:]), render(kept))

    return trimmed


def _ratings_line(scores: dict[str, int | None]) -> str:
    return "; ".join(
        f"{p.label}: {LIKERT[scores[p.key] - 1] if scores.get(p.key) else 'no answer'}" for p in PRINCIPLES
    )


def memory_steps(cfg: VeilConfig) -> tuple[tuple[str, str], ...]:
    """The (step, title) calls of one memory update."""
    if cfg.memory == "decomposed":
        return tuple((key, title) for key, title, _ in DECOMPOSED_STEPS)
    return (("summary" if cfg.memory == "summary" else "note", ""),)


def _join(calls: list[tuple[str, str, str, Reply]]) -> str:
    return "\n".join(f"{title}:\n{reply.text.strip()}" for _, title, _, reply in calls)


def update_memory(world: World, agents: list[LLMAgent], cfg: VeilConfig, r: int) -> Any:
    """Every agent updates its private memory, all at once (a SimPy process).

    Decomposed memory makes its calls in sequence, each seeing the earlier steps.
    """
    inputs = {}
    for a in agents:
        initial = _ratings_line(world.state["ratings"]["initial"][a.name]) if r == 1 else ""
        inputs[a.name] = (memory_view(a, cfg), public_view(a, cfg), initial)
    calls: dict[str, list[tuple[str, str, str, Reply]]] = {a.name: [] for a in agents}
    for step, title in memory_steps(cfg):
        prompts = {}
        for a in agents:
            old, history, initial = inputs[a.name]
            memory = "\n\n".join(x for x in (old, _join(calls[a.name])) if x)
            prompts[a.name] = memory_prompt(cfg, r, memory, history, initial, step)

        def trim(a: LLMAgent, step: str = step) -> Callable[[int], str]:
            done, initial = _join(calls[a.name]), inputs[a.name][2]
            # This update's earlier steps stay whole: only the old notes and the discussion are trimmed.
            return views_trim(a, cfg, lambda m, h: memory_prompt(
                cfg, r, "\n\n".join(x for x in (m, done) if x), h, initial, step))

        replies = yield from parallel(
            world, agents, lambda a: prompts[a.name], phase="memory", history=False, round=r, step=step,
            trim=trim,
        )
        for a, reply in zip(agents, replies):
            calls[a.name].append((step, title, prompts[a.name], reply))
    for a in agents:
        done = calls[a.name]
        memory = done[0][3].text.strip() if len(done) == 1 else _join(done)
        a.params["notes"].append((r, memory))
        a.params["seen"] = len(a.visible())
        world.emit("memory", a.name, {"text": memory}, phase="memory", round=r)
        entry = world.state["log"][a.name].setdefault(f"round_{r}", {})
        entry["memory"] = memory
        records = [{"step": step, **_call_record(cfg, a, p, reply)} for step, _, p, reply in done]
        if len(done) == 1:
            entry["memory_call"] = records[0]
        elif cfg.logging.capture_memory_steps:
            entry["memory_steps"] = records


def _call_record(cfg: VeilConfig, agent: LLMAgent, prompt: str, reply: Reply) -> dict[str, Any]:
    """Raw input/output and times of one call, as the logging options ask."""
    out: dict[str, Any] = {}
    opts = cfg.logging
    if opts.capture_raw_inputs:
        out["input"] = {"system": agent.persona, "user": prompt}
    if opts.capture_raw_outputs:
        out["raw_output"] = reply.text
    if opts.include_times:
        out["t_asked"], out["t_done"] = reply.t_asked, reply.t_done
    if reply.parse_error:
        # Flagged replies keep their raw text whatever the logging options say, and each field not read its own.
        out.update(parse_error=True, raw_output=reply.text, why=reply.reading.describe())
        if reply.reading.kept_some:
            out["unread_fields"] = {f.field: {"raw": f.raw, "why": f.why} for f in reply.reading.flags}
    if reply.reading is not None and reply.reading.how != "json":
        out["read"] = reply.reading.how
    if reply.attempts:
        out["earlier_attempts"] = [a.text for a in reply.attempts]
    return out


# -- the experiment ------------------------------------------------------------

def rate(
    world: World, agents: list[LLMAgent], cfg: VeilConfig, phase: str, prompts: dict[str, str],
    trim: Callable[[LLMAgent], Callable[[int], str]] | None = None, **fields: Any
) -> Any:
    """All agents rate the principles at once; returns {agent: {key: score or None}}."""
    replies = yield from parallel(
        world, agents, lambda a: prompts[a.name], schema=Ratings, phase=phase, history=False,
        instruction=RATING_FORMAT, trim=trim, **fields
    )
    out = {}
    for a, reply in zip(agents, replies):
        v: Ratings | None = reply.value
        # A rating that could not be read is None; the others of the same reply stand.
        kept = reply.reading.fields if v is None and reply.reading is not None else {}
        scores = v.scores() if v is not None else {k: kept.get(k) for k in KEYS}
        out[a.name] = scores
        world.emit("rating", a.name, {"scores": scores}, phase=phase)
        world.state["log"][a.name]["round_0" if phase == "rating_initial" else "final"] = {
            "likert": {k: {"score": s, "label": LIKERT[s - 1] if s else None} for k, s in scores.items()},
            "reasoning": (v.reasoning if v is not None else kept.get("reasoning")) or "",
            **_call_record(cfg, a, prompts[a.name], reply),
        }
    return out


def _choice_record(choice: Choice | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    return {
        "principle": choice.principle, "key": choice.key, "amount": choice.amount, "label": choice.describe()
    }


def deliberation_round(world: World, agents: list[LLMAgent], cfg: VeilConfig, r: int) -> Any:
    """Memory updates, then one turn per agent; returns {agent: Choice or None}."""
    yield from update_memory(world, agents, cfg, r)
    choices: dict[str, Choice | None] = {}
    for agent in speaking_order(world, agents, cfg.speaking_order, r, "deliberation"):
        memory, history = memory_view(agent, cfg), public_view(agent, cfg)
        prompt = turn_prompt(cfg, r, memory, history)
        # The prompt carries the discussion itself: only its instruction is what a reply must not repeat.
        reply = yield agent.ask(prompt, schema=Turn, phase="deliberation", history=False,
                                instruction=TURN_FORMAT, round=r,
                                trim=views_trim(agent, cfg, lambda m, h: turn_prompt(cfg, r, m, h)))
        turn: Turn | None = reply.value
        choice = None if turn is None else turn.choice()
        # An unparsable reply is still what the agent said in public: its message field where that was read.
        kept = reply.reading.fields if turn is None and reply.reading is not None else {}
        message = (turn.message if turn is not None else kept.get("message") or reply.text).strip()
        if message:
            agent.say(message, phase="deliberation", round=r)
        choices[agent.name] = choice
        key = None if choice is None else choice.key
        world.emit("ballot", agent.name, {"choice": key}, phase="deliberation", round=r)
        world.state["log"][agent.name][f"round_{r}"].update(
            public_history=history,
            **({"memory_in_prompt": memory} if cfg.logging.capture_memory_context else {}),
            strategy="" if turn is None else turn.strategy,
            communication=message,
            choice=_choice_record(choice),
            raw_choice=None if turn is None else {
                "principle": turn.principle, "constraint_amount": turn.constraint_amount
            },
            # An unreadable turn abstains (no choice); its raw text is still what it said in public.
            handling=None if turn is not None else (
                "abstains this round; " + ("its message field" if kept.get("message") else "raw reply")
                + " posted as its message"),
            **_call_record(cfg, agent, prompt, reply),
        )
    return choices


def deliberate(world: World, agents: list[LLMAgent], cfg: VeilConfig) -> Any:
    """Rounds until the decision rule is met, ``max_rounds`` or the timeout.

    Returns:
        (rounds held, end reason, the agreed :class:`Choice` or None).
    """
    rule = decision_rule(cfg.decision_rule)
    start, r = world.now, 0
    for r in range(1, cfg.max_rounds + 1):
        world.emit("phase", phase="deliberation", round=r)
        choices = yield from deliberation_round(world, agents, cfg, r)
        ordered = [choices.get(a.name) for a in agents]  # a turn dropped by a perturbation abstains
        decision = detect_consensus(ordered, rule, world.streams.numpy("vote.tiebreak"))
        world.state["decisions"].append({
            "round": r, "t": world.now, "reached": decision.reached, "choice": decision.choice,
            "tally": dict(decision.tally),
            "choices": {a.name: None if c is None else c.key for a, c in zip(agents, ordered)},
        })
        world.emit(
            "decision", None, {"choice": decision.choice, "tally": dict(decision.tally)},
            phase="deliberation", round=r, reached=decision.reached,
        )
        world.state["t_deliberation"] = world.now - start
        if decision.reached and decision.choice is not None:
            return r, "consensus", choice_from_key(decision.choice)
        if r < cfg.max_rounds and world.now - start >= cfg.timeout_s:
            return r, "timeout", None
        if cfg.announce_choices and r < cfg.max_rounds:
            text = f"No agreement after round {r}. Choices: " + "; ".join(
                f"{a.name} supports {'no valid choice' if c is None else c.describe()}"
                for a, c in zip(agents, ordered)
            ) + "."
            world.board.post(world.now, MODERATOR, text, {"phase": "announcement", "round": r})
            world.emit("message", MODERATOR, {"text": text}, phase="announcement", round=r)
    return r, "max_rounds", None


def interview(
    world: World, agents: list[LLMAgent], cfg: VeilConfig, finals: dict[str, str], outcome: str
) -> Any:
    """The feedback agent asks every agent about its final choice and its experience."""
    interviewer = world.by_name[FEEDBACK_AGENT]
    asks = [
        interviewer.ask(
            question_prompt(a.name, finals[a.name], outcome), phase="interview_question", history=False,
            target=a.name,
        )
        for a in agents
    ]
    questions = yield world.all_of(asks)
    asked = {a.name: q.text.strip() or default_question(a.name) for a, q in zip(agents, questions)}
    prompts = {
        a.name: answer_prompt(asked[a.name], memory_view(a, cfg), finals[a.name], outcome) for a in agents
    }
    answers = yield from parallel(
        world, agents, lambda a: prompts[a.name], schema=Interview, phase="interview", history=False,
        instruction=ANSWER_FORMAT,
        trim=lambda a: views_trim(a, cfg, lambda m, _: answer_prompt(asked[a.name], m, finals[a.name], outcome)),
    )
    for a, ans in zip(agents, answers):
        v: Interview | None = ans.value
        record = {
            "question": asked[a.name],
            "explanation": ans.text if v is None else v.explanation,
            "experience": "" if v is None else v.experience,
        }
        world.emit("interview", a.name, record, phase="interview")
        call = _call_record(cfg, a, prompts[a.name], ans)
        world.state["log"][a.name]["final"]["interview"] = {**record, **call}


def experiment(world: World, cfg: VeilConfig) -> Any:
    """The whole experiment, in simulated time."""
    agents = [world.by_name[n] for n in world.state["names"]]
    ratings, log = world.state["ratings"], world.state["log"]

    world.emit("phase", phase="rating_initial")
    prompts = {a.name: initial_rating_prompt() for a in agents}
    ratings["initial"] = yield from rate(world, agents, cfg, "rating_initial", prompts)

    r, end_reason, agreed = yield from deliberate(world, agents, cfg)
    world.state.update(rounds_taken=r, end_reason=end_reason, agreed=agreed)

    outcome = outcome_text(agreed)
    world.emit("phase", phase="rating_final", round=r)
    prompts = {
        a.name: final_rating_prompt(r, outcome, memory_view(a, cfg), public_view(a, cfg)) for a in agents
    }
    ratings["final"] = yield from rate(
        world, agents, cfg, "rating_final", prompts, round=r,
        trim=lambda a: views_trim(a, cfg, lambda m, h: final_rating_prompt(r, outcome, m, h)),
    )

    world.emit("phase", phase="interview")
    finals = {a.name: log[a.name][f"round_{r}"]["choice"] for a in agents}
    labels = {n: c["label"] if c else "no valid choice" for n, c in finals.items()}
    yield from interview(world, agents, cfg, labels, outcome)

    weights = cfg.class_weights or (1.0,) * len(cfg.classes)
    classes = draw_classes(len(agents), weights, world.streams.numpy("veil.classes"))
    result = lift_veil(agreed, cfg.distributions, classes, world.streams.numpy("veil.fallback"))
    world.state["outcome"] = result
    world.emit(
        "veil", None,
        {
            "choice": None if agreed is None else agreed.key,
            "distribution": cfg.distributions[result.distribution].name,
            "constraint_met": result.constraint_met,
        },
        phase="veil", fallback=result.fallback,
    )
    for a, c, income in zip(agents, result.classes, result.incomes):
        world.emit("income", a.name, {"class": cfg.classes[c], "income": income}, phase="veil")
        log[a.name]["final"].update(final_choice=finals[a.name], income_class=cfg.classes[c], income=income)
