"""The table of wire methods (``roost.wire.protocol.METHODS``) is the one place a method's
properties are stated: docs/PROTOCOL.md says the same of every method, each server registers a
handler for exactly the methods the table gives it, and a method declared mutating gets the
claims and operation-id checks without being named anywhere else.

The spec's statements checked here: the table "The methods at a glance" of section 4 (one row per
client method: served by, observer, claim, op, supervisor), the lists in the prose of sections 2,
3, 4 and 12 that name methods by a property, and the table of internal methods of section 9
(its ``served by`` column).
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from roost.actors.node import actor as node_actor
from roost.actors.node.claims import NODE as NODE_CLAIM
from roost.actors.node.control import Control
from roost.actors.node.restore import Restorer
from roost.actors.node.sessions import Sessions
from roost.actors.runtime.peer import Peer, Serving
from roost.actors.state import records as r
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from tests import kit
from tests.unit.test_protocol_spec import sections

ROOT = Path(__file__).resolve().parents[2]
SPEC = (ROOT / "docs" / "PROTOCOL.md").read_text(encoding="utf-8")
METHOD_NAME = re.compile(r"`(initialize|[a-z_]+(?:\.[a-z_]+)+)`")
GLANCE = re.compile(
    r"^\| method \| served by \| observer \| claim \| op \| supervisor \|\n"
    r"\|[-|]+\|\n((?:\|.*\n)+)",
    re.M,
)
ROW = re.compile(
    r"^\| \[`([^`]+)`\]\(#[a-z]+\) \| ([^|]+) \| (yes|no) \| (record|node|-) \| (yes|-) "
    r"\| ([^|]+) \|$"
)
CLIENT = {n: m for n, m in p.METHODS.items() if m.client}
INTERNAL = {n: m for n, m in p.METHODS.items() if not m.client or p.SUPERVISOR in m.served_by}


def between(start: str, end: str, text: str = SPEC) -> set[str]:
    """The method names quoted in ``text`` from ``start`` (which must occur once) to ``end``."""
    assert text.count(start) == 1, f"the spec no longer says {start!r}"
    tail = text[text.index(start) + len(start) :]
    assert end in tail, f"nothing ends {start!r} with {end!r}"
    return set(METHOD_NAME.findall(tail[: tail.index(end)].replace("\n", " ")))


def where(**props: Any) -> set[str]:
    return {n for n, m in CLIENT.items() if all(getattr(m, k) == v for k, v in props.items())}


# -- the table itself --------------------------------------------------------------------------


def test_the_table_is_consistent() -> None:
    servers = {p.BROKER, p.NODE, p.HUB, p.STATE, p.ADAPTER, p.SUPERVISOR}
    for name, m in p.METHODS.items():
        assert m.name == name and m.summary and set(m.served_by) <= servers, name
        assert set(m.roles) <= {p.OPERATOR, p.OBSERVER} and p.OPERATOR in m.roles, name
        if p.OBSERVER in m.roles:  # an observer only reads
            assert m.client and not (m.mutating or m.node_wide), name
        if m.committed:  # the node commits it, the supervisor executes it
            assert m.forwarded and m.committed in ("prompt", "input", "key", "turn"), name
        if m.forwarded:
            assert m.mutating and m.served_by[0] == p.NODE, name
        if not m.client:
            assert not (m.mutating or m.node_wide or m.forwarded), name


def test_the_old_sets_are_derived_from_it() -> None:
    assert set(p.CLIENT_METHODS) == set(CLIENT)
    assert {n for n, m in CLIENT.items() if p.OBSERVER in m.roles} == p.READ_METHODS
    assert p.MUTATING == where(mutating=True) == {n for n, m in CLIENT.items() if m.takes_op}
    assert (
        p.NODE_WIDE == where(node_wide=True) == {n for n, m in CLIENT.items() if m.claim == "node"}
    )
    assert where(forwarded=True) == p.FORWARDED
    assert {n for n, m in CLIENT.items() if m.committed} == p.COMMITTED_HERE
    assert p.TYPED_METHODS == {
        "session.prompt": "prompt",
        "session.input": "input",
        "session.key": "key",
    }


def test_no_module_keeps_a_set_of_method_names_of_its_own() -> None:
    """Outside the protocol module, no set, tuple or list literal names two wire methods: a
    property of methods is a field of the table, and a set of them is derived from it."""
    found = []
    for path in sorted((ROOT / "roost").rglob("*.py")):
        if path == ROOT / "roost" / "broker" / "protocol.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Set | ast.Tuple | ast.List):
                named = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if len([n for n in named if n in p.METHODS]) >= 2:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"sets of method names kept by hand: {found}"


# -- docs/PROTOCOL.md says the same ------------------------------------------------------------


def test_the_spec_table_of_client_methods_matches() -> None:
    tables = GLANCE.findall(sections()["Client methods"])
    assert len(tables) == 1, "section 4 needs exactly one 'The methods at a glance' table"
    documented = {}
    for line in tables[0].splitlines():
        row = ROW.match(line)
        assert row, f"a row the test cannot read: {line}"
        name, served, observer, claim, op, supervisor = (x.strip() for x in row.groups())
        assert name not in documented, f"{name} twice"
        documented[name] = (served, observer, claim, op, supervisor)
    expected = {
        name: (
            ", ".join(s for s in m.served_by if s in (p.BROKER, p.NODE, p.HUB)),
            "yes" if p.OBSERVER in m.roles else "no",
            m.claim or "-",
            "yes" if m.takes_op else "-",
            "handed over" if m.committed else "forwarded" if m.forwarded else "-",
        )
        for name, m in CLIENT.items()
    }
    assert documented == expected


def test_the_spec_prose_names_the_same_methods() -> None:
    # section 2, Operation ids: the methods that honour op; those committed with their input
    assert between("The node honours `op` on the **mutating methods**:", "Every other") == where(
        mutating=True
    )
    committed = between("its outcome stored as the operation. For", "the node stores")
    assert committed == p.COMMITTED_HERE
    # section 2, Claims: the mutations a record's claim does not cover; the node lease's
    node_wide_mutations = where(mutating=True, node_wide=True)
    assert between("[Operation ids](#operation-ids-header-op) but the node-wide", ")") == (
        node_wide_mutations
    )
    assert between("the **controller lease**. While it is live,", "MUST carry") == where(
        node_wide=True
    )
    node_lease = between("(the last four take grants in their bodies);", "need one only")
    assert node_lease == where(node_wide=True)
    no_grant = between("Without a live claim and without `g`", "(the last four")
    assert no_grant == where(mutating=False, node_wide=False) & p.served_by(p.NODE)
    # section 4, node.claim
    assert between("node-wide mutations", "from any request") == where(node_wide=True)
    # section 3: what an observer may call
    assert between("An `observer` may call only", "and subscribe") == p.READ_METHODS
    # section 4: who serves what; section 12: the hub's own methods
    assert between("or with no target), except", "which only a hub serves") == {"initialize"} | {
        n for n, m in CLIENT.items() if m.served_by == (p.HUB,)
    }
    assert between("**The hub's own methods** are sent", "Any other") == p.served_by(p.HUB)


def test_the_spec_table_of_internal_methods_matches() -> None:
    """Section 9's table: every internal method, with who serves it."""
    servers = {
        "broker": p.BROKER,
        "node": p.NODE,
        "state": p.STATE,
        "`adapter/<provider>`": p.ADAPTER,
        "`session/<record>`": p.SUPERVISOR,
    }
    documented: dict[str, str] = {}
    for line in sections()["Internal methods (internal, not for clients)"].splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if not line.startswith("| `") or len(cells) < 3 or "(notify)" in cells[0]:
            continue
        first = re.findall(r"`([^`]+)`", cells[0])
        if first[0] in ("hello", "ping", "publish", "notify"):  # message kinds, no methods
            continue
        prefix = first[0].rsplit(".", 1)[0]
        for name in first:
            full = prefix + name if name.startswith(".") else name
            assert full not in documented, f"{full} twice"
            documented[full] = servers[cells[1]]
    expected = {
        n: p.SUPERVISOR if p.SUPERVISOR in m.served_by else m.served_by[0]
        for n, m in INTERNAL.items()
    }
    assert documented == expected


# -- every server has a handler for exactly its methods -----------------------------------------


def test_check_served_refuses_a_missing_or_an_undeclared_handler() -> None:
    node = set(p.served_by(p.NODE))
    p.check_served(p.NODE, node)
    with pytest.raises(ValueError, match=re.escape("no handler for ['session.rename']")):
        p.check_served(p.NODE, node - {"session.rename"})
    with pytest.raises(ValueError, match=re.escape("undeclared ['session.frobnicate']")):
        p.check_served(p.NODE, node | {"session.frobnicate"})


class FakeRecords:
    listener = None


def test_the_node_actor_registers_exactly_the_node_s_methods() -> None:
    peer = kit.FakePeer()
    sessions = cast(
        Sessions, SimpleNamespace(records=FakeRecords(), locks={}, state_dir=Path("/nonexistent"))
    )
    restorer = cast(Restorer, SimpleNamespace(handle=None))
    node_actor.NodeActor(cast(Peer, peer), sessions, dict, lambda: None, set, restorer)
    assert set(peer.handlers) == p.served_by(p.NODE)


# -- a mutating method gets claims and operation ids from the table alone -----------------------


class FakeSessions(Sessions):
    """``find``, of one record (``Sessions``' own set-up is not run: nothing else is used)."""

    def __init__(self) -> None:
        self.cleaning = 0

    async def find(self, ref: str) -> r.Record:
        if ref != "r1":
            raise RoostError("not-found", "no such record")
        return r.Record("r1", "s", "echo", "pty", "/w", state=r.LIVE, generation=1)


class FakeStore(kit.FakePeer):
    """``state.op.get`` and ``state.op.put`` over a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, dict[str, Any]] = {}

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        if method == "state.op.get":
            return {"op": self.ops.get(body["id"])}
        assert method == "state.op.put"
        self.ops[body["op"]["id"]] = body["op"]
        return {"op": body["op"]}


def guarded(ran: list[str]) -> tuple[dict[str, Serving], Control, FakeStore]:
    store = FakeStore()
    control = Control(store, FakeSessions())

    def handler(name: str) -> Serving:
        async def handle(h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
            ran.append(name)
            return {"done": name}

        return handle

    return control.guarded({n: handler(n) for n in p.served_by(p.NODE)}), control, store


def call(handlers: dict[str, Serving], method: str, **header: Any) -> Any:
    h = p.Header(kind=p.REQUEST, method=method, **header)

    async def served() -> Any:
        return await handlers[method](h, {"id": "r1"})

    try:
        return asyncio.run(served())
    except RoostError as err:
        return err


NODE_CLIENT = sorted(n for n in p.served_by(p.NODE) if p.METHODS[n].client)


@pytest.mark.parametrize("method", NODE_CLIENT)
def test_a_record_s_claim_binds_what_the_table_says(method: str) -> None:
    ran: list[str] = []
    handlers, control, _ = guarded(ran)
    control.claims.claim("r1", 1, "client/other", lease_ms=30_000)
    answer = call(handlers, method)
    if p.METHODS[method].claim == "record":
        assert isinstance(answer, RoostError) and answer.code == "not-claimed" and not ran
    else:
        assert ran == [method]


@pytest.mark.parametrize("method", NODE_CLIENT)
def test_the_node_s_lease_binds_what_the_table_says(method: str) -> None:
    ran: list[str] = []
    handlers, control, _ = guarded(ran)
    control.claims.claim(NODE_CLAIM, 0, "client/other", lease_ms=30_000)
    answer = call(handlers, method)
    if p.METHODS[method].claim == "node":
        assert isinstance(answer, RoostError) and answer.code == "not-claimed" and not ran
        assert answer.detail["scope"] == "node"
    else:
        assert ran == [method]


@pytest.mark.parametrize("method", NODE_CLIENT)
def test_operation_ids_are_honoured_where_the_table_says(method: str) -> None:
    ran: list[str] = []
    handlers, _, store = guarded(ran)
    too_long = call(handlers, method, op="x" * 129)
    if not p.METHODS[method].takes_op:  # ignored: the handler runs, the store is not asked
        first, again = call(handlers, method, op="op-1"), call(handlers, method, op="op-1")
        assert ran == [method] * 3 and first == again == {"done": method} and not store.calls
        return
    assert isinstance(too_long, RoostError) and too_long.detail == {"field": "op"} and not ran
    first, again = call(handlers, method, op="op-1"), call(handlers, method, op="op-1")
    assert first == {"done": method}
    if p.METHODS[method].committed:  # its commit finds a repeat: the node asks the store nothing
        assert ran == [method] * 2 and not store.calls
    else:  # looked up first, stored once done: the repeat answers the first outcome
        assert ran == [method] and again["duplicate"] is True and again["op"]["id"] == "op-1"


def test_a_new_method_declared_mutating_is_claimed_and_takes_op_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Declared in the table and given a handler, nothing more: the claims and the operation ids
    apply to it."""
    new = p.Method("session.frobnicate", "a method added later", mutating=True)
    monkeypatch.setitem(p.METHODS, new.name, new)
    ran: list[str] = []
    handlers, control, store = guarded(ran)
    assert call(handlers, new.name, op="op-9") == {"done": new.name}
    assert call(handlers, new.name, op="op-9")["duplicate"] is True and ran == [new.name]
    assert store.methods() == ["state.op.get", "state.op.put", "state.op.get"]
    control.claims.claim("r1", 1, "client/other", lease_ms=30_000)
    refused = call(handlers, new.name)
    assert isinstance(refused, RoostError) and refused.code == "not-claimed"


def test_the_spec_says_what_a_scoped_token_may_call_as_the_table_does() -> None:
    def named(start: str, end: str) -> set[str]:
        return between(start, end) & set(CLIENT)  # the methods, not the detail fields

    assert named("**for its own records**", "**answered") == where(scoped="record")
    assert named("**answered with its own records only**", "**as for any operator**") == (
        where(scoped="own")
    )
    assert named("**as for any operator**", "**anything else") == where(scoped="open")
    assert where(scoped="open") & p.MUTATING == {"session.spawn"}  # its records' owner
    for name in where(scoped="record"):  # the body names the record its scope is checked on
        assert name.startswith("session."), name
