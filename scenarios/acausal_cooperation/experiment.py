"""The tournament as one SimPy process.

Each round:

1. **Powers** are drawn uniformly in [50, 150] (stream ``powers``), and every
   player gets a fresh anonymous label (stream ``anonymize``).
2. **Strategies.** Every LLM player's strategy agent (``A<i>``, the strategy
   model) writes a strategy, all at the same instant, so the calls run in
   parallel. It sees the anonymized aggregates of earlier rounds and its own
   results of the last round, never another player's identity.
3. **Games.** The round robin follows: one game per pair, one game after another.
   In a game both players decide at the same instant: an LLM player's decision
   subagent (``A<i>.sub``, the decision model) follows its strategy agent's
   strategy and sees its earlier games against this opponent and this round's
   games so far under the round's labels; a scripted player applies its rule at
   once. Payoffs and power updates follow :mod:`.game`. A game ends when both
   decisions are in, and the next begins :data:`GAME_GAP_S` simulated seconds
   later.
4. **Anonymization.** The round's results are reduced to aggregates for the next
   strategy prompts; the anonymized game list is written to ``round_summary_rN.json``.

Turn ``t`` of a pair's iterated game is round ``t``; that is what makes scripted
players reproduce Axelrod's R-turn matches (see :mod:`.scripted`).

Everything a run produced is kept in ``world.state["rounds"]`` for the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import mesa
import numpy as np

from scenarios.acausal_cooperation.config import AcausalConfig
from scenarios.acausal_cooperation.game import (
    COOPERATE,
    DEFECT,
    anonymous_labels,
    draw_powers,
    payoffs,
    powers_after,
    round_robin,
)
from scenarios.acausal_cooperation.prompts import (
    STRATEGY_SYSTEM,
    DecisionReply,
    OwnDigest,
    RoundDigest,
    StrategyReply,
    decision_prompt,
    original_decision_prompt,
    read_decision,
    read_strategy,
    strategy_prompt,
)
from scenarios.acausal_cooperation.scripted import Script
from simcore.api import LLMAgent, Reply, World, parallel

GAME_GAP_S = 1.0


class ScriptedAgent(mesa.Agent):
    """A non-LLM player: a classic strategy with its own random stream."""

    def __init__(self, world: World, name: str, script: Script) -> None:
        super().__init__(world)
        self.name = name
        self.script = script
        self.stream: np.random.Generator = world.streams.numpy(f"script.{name}")

    def decide(self, own: Sequence[str], opp: Sequence[str]) -> str:
        """The move given the pair's earlier turns."""
        return self.script.decide(own, opp, self.stream)


@dataclass(frozen=True)
class Player:
    """One tournament player: an LLM pair (strategist + decider) or a scripted agent."""

    index: int
    name: str
    strategist: LLMAgent | None = None
    decider: LLMAgent | None = None
    scripted: ScriptedAgent | None = None

    @property
    def kind(self) -> str:
        return "scripted" if self.scripted is not None else "llm"

    def describe(self) -> dict[str, Any]:
        """The player's row in the output files."""
        return {
            "agent_id": self.index,
            "name": self.name,
            "kind": self.kind,
            "script": self.scripted.script.label if self.scripted else None,
            "strategy_model": self.strategist.model_name if self.strategist else None,
            "decision_model": self.decider.model_name if self.decider else None,
        }


def build(world: World, cfg: AcausalConfig) -> None:
    """Create the players and start the tournament."""
    players: list[Player] = []
    strategy_model, decision_model = cfg.role_models
    for i in range(cfg.n_agents):
        strategist = LLMAgent(
            world, f"A{i}", role="strategist", persona=STRATEGY_SYSTEM,
            model_name=strategy_model, temperature=cfg.strategy_temperature,
            max_output_tokens=cfg.strategy_tokens, params={"player": i},
        )
        decider = LLMAgent(
            world, f"A{i}.sub", role="decider", model_name=decision_model,
            temperature=cfg.decision_temperature, max_output_tokens=cfg.decision_tokens,
            params={"player": i},
        )
        players.append(Player(i, f"A{i}", strategist=strategist, decider=decider))
    for k, script in enumerate(cfg.scripts):
        i = cfg.n_agents + k
        players.append(Player(i, f"A{i}", scripted=ScriptedAgent(world, f"A{i}", script)))
    world.state.update(players=[p.describe() for p in players], rounds=[])
    world.process(Tournament(world, cfg, players).run())


class Tournament:
    """The tournament's state between events, and its rounds as SimPy processes."""

    def __init__(self, world: World, cfg: AcausalConfig, players: list[Player]) -> None:
        self.world, self.cfg, self.players = world, cfg, players
        n = len(players)
        # pair_moves[(i, j)]: (i's move, j's move) in each earlier game of i against j.
        self.pair_moves: dict[tuple[int, int], list[tuple[str, str]]] = {
            (i, j): [] for i in range(n) for j in range(n) if i != j
        }
        self.digests: list[RoundDigest] = []
        self.own: dict[int, OwnDigest] = {}
        self.fallback = COOPERATE if cfg.on_unparsed == "cooperate" else DEFECT
        # This round's state.
        self.r = 0
        self.power: list[float] = []
        self.labels: list[str] = []
        self.strategies: dict[int, str] = {}
        self.public: list[tuple[str, str, str, str]] = []

    def run(self) -> Any:
        """All rounds, in simulated time."""
        for r in range(1, self.cfg.rounds + 1):
            yield from self.play_round(r)

    def play_round(self, r: int) -> Any:
        """Powers and labels, strategies, the round robin, then the anonymized results."""
        world, cfg, n = self.world, self.cfg, len(self.players)
        self.r = r
        self.power = draw_powers(world.streams.numpy("powers"), n)
        self.labels = anonymous_labels(world.streams.numpy("anonymize"), n)
        self.strategies, self.public = {}, []
        record: dict[str, Any] = {
            "round": r, "t_start": world.now, "powers_initial": list(self.power),
            "labels": self.labels, "strategies": [], "games": [],
        }
        world.state["rounds"].append(record)
        world.emit("round.start", payload={"powers": list(self.power), "labels": list(self.labels)}, round=r)

        llm = [p for p in self.players if p.strategist is not None]
        if llm:
            replies = yield from parallel(
                world, [p.strategist for p in llm], self.strategy_prompt, schema=StrategyReply,
                phase="strategy", history=False, round=r,
            )
            for p, reply in zip(llm, replies):
                text, raw = read_strategy(reply)
                self.strategies[p.index] = text
                record["strategies"].append(_strategy_record(r, p, reply, text, raw, self.power[p.index]))

        pairs = round_robin(n)
        if cfg.game_order == "random":
            pairs = [pairs[k] for k in world.streams.numpy("game_order").permutation(len(pairs))]
        for g, (i, j) in enumerate(pairs, start=1):
            game = yield from self.play_game(g, i, j)
            record["games"].append(game)
            yield world.timeout(GAME_GAP_S)

        record["powers_final"] = list(self.power)
        record["t_end"] = world.now
        record["anonymized_games"] = anonymize(record["games"], self.labels, world.streams.numpy("anonymize"))
        digest, self.own = _digest(r, n, record["games"])
        self.digests.append(digest)
        world.emit(
            "round.end",
            payload={
                "cooperation_rate": digest.cooperation_rate,
                "mutual_cooperation_rate": digest.mutual_cooperation_rate,
            },
            round=r,
        )

    def strategy_prompt(self, agent: LLMAgent) -> str:
        """The strategy prompt of one strategy agent this round."""
        cfg, i = self.cfg, agent.params["player"]
        return strategy_prompt(
            insight=cfg.identity_insight, n_players=len(self.players), n_scripted=len(cfg.scripts),
            rounds=cfg.rounds, round_index=self.r,
            power=self.power[i] if cfg.power_scaling else None, power_step=cfg.power_step,
            previous=self.digests, own=self.own.get(i),
        )

    def play_game(self, g: int, i: int, j: int) -> Any:
        """One game: both decide at once, then payoffs and powers; returns its record."""
        world, cfg, power, r = self.world, self.cfg, self.power, self.r
        before, t0 = (power[i], power[j]), world.now
        values = yield world.all_of([self.decide(g, i, j), self.decide(g, j, i)])
        moves, how, raw = [], [], []
        for v in values:
            move, read = read_decision(v, self.fallback) if isinstance(v, Reply) else (v, "scripted")
            moves.append(move)
            how.append(read)
            # The reply as written, wherever it was not plain JSON (how a move was read shows).
            raw.append(v.text if isinstance(v, Reply) and read != "json" else None)
        a1, a2 = moves
        pay = payoffs(a1, a2, *before, scaling=cfg.power_scaling)
        power[i], power[j] = powers_after(a1, a2, *before, step=cfg.power_step)
        self.pair_moves[(i, j)].append((a1, a2))
        self.pair_moves[(j, i)].append((a2, a1))
        self.public.append((self.labels[i], self.labels[j], a1, a2))
        world.emit(
            "game",
            payload={
                "players": [i, j], "actions": [a1, a2], "payoffs": list(pay),
                "power_before": list(before), "power_after": [power[i], power[j]], "read": how,
            },
            round=r, game=g,
        )
        return {
            "game_id": f"r{r}_g{g}", "round": r, "game_number": g,
            "player1_id": i, "player2_id": j,
            "player1_action": a1, "player2_action": a2,
            "player1_payoff": pay[0], "player2_payoff": pay[1],
            "player1_power_before": before[0], "player2_power_before": before[1],
            "player1_power_after": power[i], "player2_power_after": power[j],
            "player1_parse": how[0], "player2_parse": how[1],
            "player1_raw": raw[0], "player2_raw": raw[1],
            "sim_time_start": t0, "sim_time": world.now,
        }

    def decide(self, g: int, me: int, opp: int) -> Any:
        """The event of player ``me``'s move against ``opp``: an LLM call, or a scripted move at once."""
        p, history, cfg = self.players[me], self.pair_moves[(me, opp)], self.cfg
        if p.scripted is not None:
            return self.world.timeout(0, p.scripted.decide([a for a, _ in history], [b for _, b in history]))
        assert p.decider is not None
        pair = [(k + 1, a, b) for k, (a, b) in enumerate(history)]
        public = self.public[-cfg.history_window:] if cfg.history_window else ()
        if cfg.decision_prompt == "original":
            text = original_decision_prompt(opponent=self.labels[opp], strategy=self.strategies[me],
                                            pair_history=pair, round_games=public)
        else:
            text = decision_prompt(
                me=self.labels[me], opponent=self.labels[opp], strategy=self.strategies[me],
                powers=(self.power[me], self.power[opp]) if cfg.power_scaling else None,
                pair_history=pair, round_games=public,
            )
        return p.decider.ask(text, schema=DecisionReply, phase="decision", history=False, round=self.r, game=g)


def anonymize(games: Sequence[dict[str, Any]], labels: Sequence[str], rng: np.random.Generator) -> list[dict[str, Any]]:
    """A round's games as others may see them: the round's labels instead of ids,
    games in a random order and each game's two sides swapped with probability 1/2,
    so that neither the order nor the sides reveal who played."""
    out = []
    for k in rng.permutation(len(games)):
        g = games[int(k)]
        sides = [(g["player1_id"], g["player1_action"], g["player1_payoff"]),
                 (g["player2_id"], g["player2_action"], g["player2_payoff"])]
        if rng.random() < 0.5:
            sides.reverse()
        (i, a1, p1), (j, a2, p2) = sides
        out.append({
            "round": g["round"], "player1_anonymous": labels[i], "player2_anonymous": labels[j],
            "action1": a1, "action2": a2, "payoff1": p1, "payoff2": p2,
        })
    return out


def _strategy_record(r: int, p: Player, reply: Reply, text: str, raw: bool, power: float) -> dict[str, Any]:
    usage = reply.usage
    return {
        "strategy_id": f"r{r}_a{p.index}",
        "agent_id": p.index,
        "round": r,
        "strategy_text": text,
        "full_reasoning": reply.text,
        "read": reply.reading.how if reply.reading is not None else None,
        "prompt_tokens": usage.prompt_tokens if usage else None,
        "completion_tokens": usage.completion_tokens if usage else None,
        "model": p.strategist.model_name if p.strategist else None,
        "power": power,
        "parse_error": raw,
        "sim_time": reply.t_done,
    }


def round_scores(n: int, games: Sequence[dict[str, Any]]) -> list[float]:
    """Each player's summed payoff over ``games``."""
    scores = [0.0] * n
    for g in games:
        scores[g["player1_id"]] += g["player1_payoff"]
        scores[g["player2_id"]] += g["player2_payoff"]
    return scores


def _digest(r: int, n: int, games: Sequence[dict[str, Any]]) -> tuple[RoundDigest, dict[int, OwnDigest]]:
    """The anonymized aggregates of a round, and each player's own results."""
    moves = [g["player1_action"] for g in games] + [g["player2_action"] for g in games]
    mutual = sum(g["player1_action"] == g["player2_action"] == COOPERATE for g in games)
    scores = round_scores(n, games)
    counts = {i: [0, 0, 0] for i in range(n)}  # games, cooperated, cooperated with
    for g in games:
        for me, a, b in ((g["player1_id"], g["player1_action"], g["player2_action"]),
                         (g["player2_id"], g["player2_action"], g["player1_action"])):
            c = counts[me]
            c[0] += 1
            c[1] += a == COOPERATE
            c[2] += b == COOPERATE
    digest = RoundDigest(
        round=r,
        cooperation_rate=moves.count(COOPERATE) / len(moves),
        mutual_cooperation_rate=mutual / len(games),
        score_mean=float(np.mean(scores)), score_min=min(scores), score_max=max(scores),
    )
    own = {i: OwnDigest(c[0], c[1], c[2], scores[i]) for i, c in counts.items()}
    return digest, own
