"""Topology builders and message visibility."""

from __future__ import annotations

import networkx as nx
import pytest

from backends.stub import StubBackend
from simcore.api import LLMAgent, World
from simcore.base.config import ConfigError
from simcore.sim import topology
from simcore.sim.protocols import speaking_round
from simcore.sim.topology import (
    build,
    complete,
    from_file,
    ring,
    scale_free,
    small_world,
    star,
)

NAMES = [f"N{i}" for i in range(8)]


def test_complete_star_ring():
    g = complete(NAMES)
    assert g.number_of_edges() == 8 * 7
    s = star(NAMES, "N3")
    assert set(s.successors("N3")) == set(NAMES) - {"N3"}
    assert set(s.successors("N0")) == {"N3"}
    r = ring(NAMES)
    assert set(r.successors("N0")) == {"N1", "N7"}
    assert all(r.out_degree(n) == 2 for n in NAMES)


def test_random_families_are_seeded_and_symmetric():
    a = small_world(NAMES, k=4, p=0.3, seed=5)
    b = small_world(NAMES, k=4, p=0.3, seed=5)
    assert sorted(a.edges) == sorted(b.edges)
    assert all(a.has_edge(v, u) for u, v in a.edges)
    sf = scale_free(NAMES, m=2, seed=9)
    assert set(sf.nodes) == set(NAMES)
    assert build("small_world:k=4,p=0.3", NAMES, seed=1).number_of_edges() > 0


def test_build_spec_errors_name_the_field():
    for spec in ("hexagon", "small_world:k=99", "scale_free:m=0", "ring:x=1", "star:ZZ"):
        with pytest.raises(ConfigError, match=r"^topology: "):
            build(spec, NAMES)


def test_edge_list_and_graphml_files(tmp_path):
    edges = tmp_path / "net.edges"
    edges.write_text("A B\nB C\n")
    g = from_file(edges, ["A", "B", "C"])
    assert sorted(g.edges) == [("A", "B"), ("B", "C")]
    und = nx.Graph([("A", "B"), ("B", "C")])
    gml = tmp_path / "net.graphml"
    nx.write_graphml(und, gml)
    g2 = build(f"file:{gml}", ["A", "B", "C"])
    assert g2.has_edge("A", "B") and g2.has_edge("B", "A") and not g2.has_edge("A", "C")
    with pytest.raises(ConfigError, match="missing"):
        from_file(edges, ["A", "B", "C", "D"])


def test_agents_see_only_predecessors_and_themselves():
    world = World(1, StubBackend())
    names = ["A", "B", "C", "D"]
    for n in names:
        LLMAgent(world, n, max_output_tokens=40)
    world.set_topology(nx.DiGraph([("A", "B"), ("B", "C"), ("C", "D")]))  # a chain
    agents = [world.by_name[n] for n in names]
    world.process(speaking_round(world, agents, "Say something.", round_index=1))
    world.run()
    seen = {n: [m.speaker for m in world.by_name[n].visible()] for n in names}
    assert seen == {"A": ["A"], "B": ["A", "B"], "C": ["B", "C"], "D": ["C", "D"]}
    # what D was asked contained C's words but not A's
    d_call = [e for e in world.trace.of_kind("message")]
    assert len(d_call) == 4
    prompt_d = world.by_name["D"].context()
    assert prompt_d.startswith("C: ") and "A: " not in prompt_d


def test_complete_topology_is_broadcast():
    world = World(1, StubBackend())
    for n in "XYZ":
        LLMAgent(world, n)
    world.set_topology(complete(list("XYZ")))
    assert world.board.broadcast
    world.by_name["X"].say("hello")
    assert [m.text for m in world.by_name["Z"].visible()] == ["hello"]


@pytest.mark.parametrize("make", [
    lambda n: nx.watts_strogatz_graph(n, 4, 0.3, seed=3),
    lambda n: nx.barabasi_albert_graph(n, 2, seed=5),
    lambda n: nx.cycle_graph(n),
])
def test_relabelled_graph_keeps_the_edge_order_of_graph_edges(make):
    names = [f"n{i}" for i in range(40)]
    g = make(40)
    g.add_edge(7, 7)  # a self-loop, once
    expected = nx.DiGraph()
    expected.add_nodes_from(names)
    for u, v in g.edges:
        expected.add_edge(names[u], names[v])
        expected.add_edge(names[v], names[u])
    got = topology._relabel(g, names)
    assert list(got.edges) == list(expected.edges)
    assert [list(got.predecessors(n)) for n in names] == [list(expected.predecessors(n)) for n in names]


@pytest.mark.parametrize("spec", ["complete", "star:N2", "ring", "small_world:k=4,p=0.3", "scale_free:m=2"])
def test_built_in_families_are_read_only_symmetric_views(spec):
    g = build(spec, NAMES, seed=3)
    assert isinstance(g, nx.DiGraph) and nx.is_frozen(g)
    assert [list(g.successors(n)) for n in NAMES] == [list(g.predecessors(n)) for n in NAMES]
    with pytest.raises(nx.NetworkXError, match="Frozen"):
        g.add_edge("N0", "N1")
    copy = g.copy()  # the way to change one: a plain DiGraph
    assert not nx.is_frozen(copy) and list(copy.edges) == list(g.edges)
    copy.remove_edge(*next(iter(copy.edges)))
    assert copy.number_of_edges() == g.number_of_edges() - 1


def test_complete_and_star_keep_the_order_of_a_digraph_built_edge_by_edge():
    full = nx.DiGraph()
    full.add_nodes_from(NAMES)
    full.add_edges_from((u, v) for u in NAMES for v in NAMES if u != v)
    spokes = nx.DiGraph()
    spokes.add_nodes_from(NAMES)
    for v in NAMES:
        if v != "N2":
            spokes.add_edges_from([("N2", v), (v, "N2")])
    for got, expected in ((complete(NAMES), full), (star(NAMES, "N2"), spokes)):
        assert list(got.edges) == list(expected.edges)
        assert [list(got.predecessors(n)) for n in NAMES] == [list(expected.predecessors(n)) for n in NAMES]
