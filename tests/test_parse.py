"""Every construct of the `.sync` language parses and resolves to the expected IR.

IR nodes carry spans; `plain` drops them so the expectations stay readable:
an expression becomes an int (Const), a name (Var), `@cta` / `@instance`
(Builtin), `role:NAME` (InRole) or a tuple (op, operands…); an object
reference becomes `name`, `name[index]` or `name[*]`; any other node becomes
(ClassName, {field: value}).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from lark import Lark

import syncverify
from syncverify import ir
from syncverify.lang.parse import grammar_text
from syncverify.lang.resolve.operations import OPERATIONS


def plain(x: Any) -> Any:
    if isinstance(x, ir.Const):
        return x.value
    if isinstance(x, ir.Var):
        return x.name
    if isinstance(x, ir.Builtin):
        return "@" + x.name
    if isinstance(x, ir.InRole):
        return "role:" + x.role
    if isinstance(x, ir.BinOp):
        return (x.op, plain(x.left), plain(x.right))
    if isinstance(x, ir.UnOp):
        return (x.op, plain(x.operand))
    if isinstance(x, ir.Ref):
        if x.every:
            return f"{x.name}[*]"
        return x.name if x.index is None else (x.name, plain(x.index))
    if isinstance(x, tuple | list):
        return [plain(v) for v in x]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        # (a field left at its default, e.g. a barrier's `aligned`, is shown only where it differs)
        return (type(x).__name__, {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)
                                   if f.name != "span" and getattr(x, f.name) != f.default})
    return x


def load(text: str, **defines: int) -> ir.Protocol:
    return syncverify.load(text, defines=defines, path="t.sync")


# A roomy kernel shape that every operation below can run in.
PRELUDE = """\
protocol ops {
  param STAGES = 2;
  param BYTES = 1024;
  cluster 2;
  cta threads 384;
  role producer = warp 0;
  role consumer[2] = warpgroup 1 + i;
  smem tile[STAGES] bytes BYTES;
  smem out bytes 256;
  mbarrier full[STAGES] count 1;
  mbarrier empty[STAGES];
  mbarrier one count 3;
  named sched[2] id 1 + i count 128 * (i + 1);
  named epi id 5; tmem acc[2] cols 128;
"""


def body(stmts: str, **defines: int) -> list[Any]:
    return plain(load(PRELUDE + stmts + "\n}\n", **defines).body)


def only(stmts: str) -> Any:
    out = body(stmts)
    assert len(out) == 1, out
    return out[0]


def Ref(name: str, index: Any = None) -> Any:
    return name if index is None else (name, index)


def Arrive(bar: Any, count: Any = 1, tx: Any = None, drop: bool = False, sem: str = "release",
           scope: str = "cta", remote: Any = None) -> Any:
    return ("MbarArrive", {"bar": bar, "count": count, "tx_bytes": tx, "drop": drop, "sem": sem, "scope": scope,
                           "remote": remote})


# ---------------------------------------------------------------------------
# The grammar


def test_grammar_loads_in_strict_mode():
    """No shift/reduce or reduce/reduce conflicts, no terminal collisions."""
    Lark(grammar_text(), parser="lalr", lexer="contextual", strict=True)


def test_comments_and_whitespace_are_ignored():
    p = load("// leading\n/* block\n { } */ protocol  c{cta threads 32;// trailing\n}")
    assert p.name == "c" and p.body == () and p.threads == 32


# ---------------------------------------------------------------------------
# Declarations


def test_params_and_defines():
    text = "protocol p { param A = 3; param B = A * 2 + 1; param C = B; cta threads 32; }"
    assert load(text).params == (("A", 3), ("B", 7), ("C", 7))
    # -D overrides the param's own value, and later params see the override.
    assert load(text, A=10).params == (("A", 10), ("B", 21), ("C", 21))
    assert load(text, B=0).params == (("A", 3), ("B", 0), ("C", 0))
    assert load(text).param("B") == 7


def test_define_changes_array_sizes_and_loop_bounds():
    p = load(PRELUDE + "for k in 0..STAGES { }\n}", STAGES=4)
    assert p.buffer("tile").slots == 4 and p.mbarrier("full").size == 4
    assert plain(p.body[0])[1]["hi"] == 4


def test_load_reads_files_and_text(tmp_path):
    path = tmp_path / "k.sync"
    path.write_text("protocol k { cta threads 64; }\n")
    for source in (path, str(path)):
        p = syncverify.load(source)
        assert p.name == "k" and p.path == str(path)
    assert syncverify.load("protocol k { cta threads 64; }").path == "<text>"


def test_cluster_and_threads():
    p = load("protocol p { cluster 4; cta threads 256; }")
    assert (p.cluster, p.threads, p.warps) == (4, 256, 8)
    assert load("protocol p { cta threads 32; }").cluster == 1


def test_every_role_range_kind():
    p = load("""protocol roles {
      cta threads 1024;
      role t1 = thread 0;
      role tr = threads 1..32;
      role w1 = warp 1;
      role wr = warps 2..4;
      role g1 = warpgroup 1;
      role gr = warpgroups 2..4;
      role arr[2] = warps 16 + 2*i..18 + 2*i;
      role grp[2] = warpgroup 6 + i;
    }""")
    got = {r.name: (r.instances, r.array) for r in p.roles}
    assert got == {
        "t1": (((0, 1),), False),
        "tr": (((1, 32),), False),
        "w1": (((32, 64),), False),
        "wr": (((64, 128),), False),
        "g1": (((128, 256),), False),
        "gr": (((256, 512),), False),
        "arr": (((512, 576), (576, 640)), True),
        "grp": (((768, 896), (896, 1024)), True),
    }
    assert p.role("w1").span.line == 5


def test_smem_and_mbarrier_declarations():
    p = load(PRELUDE + "}")
    assert [(b.name, b.slots, b.bytes) for b in p.buffers] == [("tile", 2, 1024), ("out", None, 256)]
    assert [(m.name, m.size, m.count) for m in p.mbarriers] == [("full", 2, 1), ("empty", 2, None),
                                                                 ("one", None, 3)]


def test_named_barrier_arrays_substitute_i():
    assert only("bar.sync sched[0];") == ("BarSync", {"bar_id": 1, "count": 128})
    assert only("bar.sync sched[1];") == ("BarSync", {"bar_id": 2, "count": 256})
    assert only("bar.arrive sched[1];") == ("BarArrive", {"bar_id": 2, "count": 256})
    # A loop variable index stays symbolic: `i` is replaced by `k` and folded as far as possible.
    loop = only("for k in 0..2 { bar.sync sched[k]; }")
    assert loop[1]["body"] == [("BarSync", {"bar_id": ("+", 1, "k"), "count": ("*", 128, ("+", "k", 1))})]
    # A scalar named barrier without a count: the count comes from the op, or is the whole CTA.
    assert only("bar.sync epi;") == ("BarSync", {"bar_id": 5, "count": None})
    assert only("bar.sync epi count 64;") == ("BarSync", {"bar_id": 5, "count": 64})
    assert only("bar.arrive epi count 96;") == ("BarArrive", {"bar_id": 5, "count": 96})
    # The op's `count` overrides the declaration's.
    assert only("bar.sync sched[0] count 64;") == ("BarSync", {"bar_id": 1, "count": 64})


def test_bar_ids_and_counts_from_params_and_variables():
    out = body("bar.sync STAGES, BYTES / 8; for k in 1..3 { bar.arrive k, 32 * k; }")
    assert out[0] == ("BarSync", {"bar_id": 2, "count": 128})
    assert out[1][1]["body"] == [("BarArrive", {"bar_id": "k", "count": ("*", 32, "k")})]


# ---------------------------------------------------------------------------
# Expressions


@pytest.mark.parametrize(("expr", "value"), [
    # C semantics: / and % truncate toward zero.
    ("7 / 2", 3), ("-7 / 2", -3), ("7 / -2", -3), ("-7 / -2", 3),
    ("7 % 2", 1), ("-7 % 2", -1), ("7 % -2", 1), ("-7 % -2", -1), ("-8 % 4", 0),
    # Precedence and associativity as in C.
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("10 - 4 - 3", 3), ("100 / 10 / 5", 2), ("2 * 3 % 4", 2),
    ("1 << 2 + 1", 8), ("64 >> 1 >> 2", 8), ("1 | 2 ^ 3 & 1", 3), ("6 & 3 | 8", 10), ("5 ^ 1 | 0", 4),
    ("2 + 3 == 5", 1), ("1 + 2 < 4 && 5 > 4", 1), ("1 <= 1", 1), ("2 >= 3", 0), ("1 != 1", 0),
    ("!0 && 1 || 0", 1), ("0 || 0 && 1", 0), ("1 || 0 && 0", 1), ("!5", 0), ("!!5", 1),
    ("-2 * 3", -6), ("- -3", 3), ("-(2 + 3)", -5),
    # As in C, comparisons bind tighter than the bit operators: `1 & 3 == 3` is `1 & (3 == 3)`.
    ("1 & 3 == 3", 1), ("2 | 1 == 3", 2), ("6 ^ 3 != 5", 7), ("(1 & 3) == 3", 0), ("1 < 2 == 1", 1),
    # Literals.
    ("0x10 + 0b11 + 1_000", 1019), ("0", 0), ("0xFF", 255),
])
def test_constant_expressions_fold(expr, value):
    assert body(f"let x = {expr};") == [("Let", {"name": "x", "value": value})]


def test_params_fold_into_expressions():
    assert body("let s = (BYTES / STAGES + 1) % 7;") == [("Let", {"name": "s", "value": (1024 // 2 + 1) % 7})]


def test_symbolic_expressions():
    out = body("""
      let y = cta + instance;
      for k in 0..4 { let z = k * 2 + STAGES; let w = (k / STAGES + 1) % 2; }
      if producer && cta == 0 { }
      if !consumer || instance != 1 { }
    """)
    assert out[0] == ("Let", {"name": "y", "value": ("+", "@cta", "@instance")})
    assert out[1][1]["body"] == [
        ("Let", {"name": "z", "value": ("+", ("*", "k", 2), 2)}),
        ("Let", {"name": "w", "value": ("%", ("+", ("/", "k", 2), 1), 2)}),
    ]
    assert out[2][1]["cond"] == ("&&", "role:producer", ("==", "@cta", 0))
    assert out[3][1]["cond"] == ("||", ("!", "role:consumer"), ("!=", "@instance", 1))


def test_keywords_stay_usable_as_names():
    out = body("let bytes = 32; let count = 2; let read = 1; arrive.expect_tx one bytes bytes; "
               "arrive one count count; read out;")
    assert out[3] == Arrive("one", tx="bytes")
    assert out[4] == Arrive("one", count="count")
    assert out[5] == ("Access", {"kind": "read", "buf": "out", "remote": None})


# ---------------------------------------------------------------------------
# Statements


def test_let_for_if_else():
    out = body("""
      for k in 0..STAGES {
        let s = k % STAGES;
        if s == 0 { syncwarp; } else if s == 1 { read out; } else { write out; }
      }
    """)
    assert out == [("For", {"var": "k", "lo": 0, "hi": 2, "body": [
        ("Let", {"name": "s", "value": ("%", "k", 2)}),
        ("If", {"cond": ("==", "s", 0), "then": [("Syncwarp", {})], "orelse": [
            ("If", {"cond": ("==", "s", 1), "then": [("Access", {"kind": "read", "buf": "out", "remote": None})],
                    "orelse": [("Access", {"kind": "write", "buf": "out", "remote": None})]})]})]})]


def test_if_without_else_and_empty_blocks():
    assert body("if 1 { }") == [("If", {"cond": 1, "then": [], "orelse": []})]


def elect_roles(stmts: list[Any]) -> list[tuple[str | None, bool]]:
    """(role, per_warp) of every Elect, in source order."""
    found: list[tuple[str | None, bool]] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for n in node:
                walk(n)
        elif isinstance(node, tuple) and len(node) == 2 and isinstance(node[1], dict):
            if node[0] == "Elect":
                found.append((node[1]["role"], node[1]["per_warp"]))
            for v in node[1].values():
                walk(v)

    walk(stmts)
    return found


def test_first_thread_role_is_the_innermost_role_guard():
    out = body("""
      first thread { init full[*]; }
      if producer { first thread { arrive one; } }
      if producer { if consumer { first thread { arrive one; } } }
      if producer { for k in 0..2 { if k == 0 { first thread { arrive one; } } } }
      if producer && cta == 0 { first thread { arrive one; } }
      if cta == 0 && consumer { first thread { arrive one; } }
      if producer { } else { first thread { arrive one; } }
      if consumer { } else if producer { first thread { arrive one; } }
      if !producer { first thread { arrive one; } }
      if producer || consumer { first thread { arrive one; } }
    """)
    assert elect_roles(out) == [
        (None, False), ("producer", False), ("consumer", False), ("producer", False), ("producer", False),
        ("consumer", False), (None, False), ("producer", False), (None, False), (None, False),
    ]


def test_elect_is_per_warp_wherever_it_stands():
    """`elect` is elect.sync: one lane of each warp that reaches it, whatever guards it."""
    out = body("""
      elect { init full[*]; }
      if producer { elect { arrive one; } }
      if !producer { elect { arrive one; } }
    """)
    assert [per_warp for _, per_warp in elect_roles(out)] == [True, True, True]


def test_elect_per_warp_and_first_thread_bodies():
    out = body("if producer { elect { arrive one; } per warp { arrive one count 2; } first thread { arrive one; } }")
    assert out[0][1]["then"] == [
        ("Elect", {"body": [Arrive("one")], "role": "producer", "per_warp": True}),
        ("Elect", {"body": [Arrive("one", count=2)], "role": "producer", "per_warp": True}),
        ("Elect", {"body": [Arrive("one")], "role": "producer", "per_warp": False}),
    ]


def test_first_and_thread_stay_usable_as_names():
    p = load("protocol p { cta threads 64; role first = warp 0; mbarrier thread count 1; "
             "if first { first thread { init thread; } } }")
    assert [r.name for r in p.roles] == ["first"]
    assert p.body[0].then[0].role == "first" and not p.body[0].then[0].per_warp


def test_ring_example_resolves():
    p = syncverify.load(RING, path="ring.sync")
    assert p.name == "ws_ring" and p.threads == 384 and p.cluster == 1
    assert p.expect == ir.Expectation(frozenset(), frozenset(), p.expect.span) and p.expect.span.line == 2
    assert [(r.name, r.instances) for r in p.roles] == [("producer", ((0, 32),)),
                                                         ("consumer", ((128, 256), (256, 384)))]
    init, sync, prod, cons = plain(p.body)
    assert init[1]["then"][0] == ("Elect", {"role": "producer", "per_warp": True, "body": [
        ("MbarInit", {"bar": "full[*]", "count": None}), ("MbarInit", {"bar": "empty[*]", "count": None}),
        ("Fence", {"kind": "mbarrier_init"})]})
    assert sync == ("BarSync", {"bar_id": 0, "count": None})
    loop = prod[1]["then"][0]
    assert loop[0] == "For" and loop[1]["hi"] == 16
    assert loop[1]["body"][1] == ("MbarWait", {"bar": ("empty", "s"), "parity": ("%", ("+", ("/", "k", 4), 1), 2),
                                                "sem": "acquire", "scope": "cta"})
    assert loop[1]["body"][2][1]["body"] == [
        Arrive(("full", "s"), tx=16384),
        ("TmaLoad", {"buf": ("tile", "s"), "tx_bytes": 16384, "bar": ("full", "s"), "multicast": None}),
    ]
    assert cons[1]["then"][0][1]["body"][3] == Arrive(("empty", "s"))


RING = """\
// CUTLASS-style warp-specialized TMA ring
// expect: safe
protocol ws_ring {
  param STAGES = 4;
  param ITERS  = 16;
  param BYTES  = 16384;
  cta threads 384;
  role producer    = warp 0;
  role consumer[2] = warpgroup 1 + i;
  smem tile[STAGES] bytes BYTES;
  mbarrier full[STAGES]  count 1;
  mbarrier empty[STAGES] count 256;
  if producer { elect { init full[*]; init empty[*]; fence.mbarrier_init; } }
  syncthreads;
  if producer {
    for k in 0..ITERS {
      let s = k % STAGES;
      wait empty[s] parity (k / STAGES + 1) % 2;
      elect {
        arrive.expect_tx full[s] bytes BYTES;
        tma.load tile[s] bytes BYTES -> full[s];
      }
    }
  }
  if consumer {
    for k in 0..ITERS {
      let s = k % STAGES;
      wait full[s] parity (k / STAGES) % 2;
      read tile[s];
      arrive empty[s];
    }
  }
}
"""


# ---------------------------------------------------------------------------
# Operations: every entry of resolve.OPERATIONS, with its qualifiers and clauses.

OP_CASES: list[tuple[str, str, Any]] = [
    # mbarrier lifecycle
    ("init", "init full[0];", ("MbarInit", {"bar": ("full", 0), "count": None})),
    ("init", "init empty[*] count 256;", ("MbarInit", {"bar": "empty[*]", "count": 256})),
    ("init", "init.shared::cta one count STAGES + 1;", ("MbarInit", {"bar": "one", "count": 3})),
    ("inval", "inval full[*];", ("MbarInval", {"bar": "full[*]"})),
    ("inval", "inval.shared::cta one;", ("MbarInval", {"bar": "one"})),
    # arrivals
    ("arrive", "arrive full[1];", Arrive(("full", 1))),
    ("arrive", "arrive one count 3;", Arrive("one", count=3)),
    ("arrive", "arrive.release.cluster full[1] @ 1;", Arrive(("full", 1), scope="cluster", remote=1)),
    ("arrive", "arrive.relaxed.cta one;", Arrive("one", sem="relaxed")),
    ("arrive", "arrive.release.cta.shared::cluster one @ cta ^ 1;", Arrive("one", remote=("^", "@cta", 1))),
    ("arrive", "arrive.shared::cta one;", Arrive("one")),
    ("arrive", "arrive.expect_tx full[0] bytes BYTES;", Arrive(("full", 0), tx=1024)),
    ("arrive", "arrive.expect_tx.release.cluster full[0] bytes 32 @ 0;",
     Arrive(("full", 0), tx=32, scope="cluster", remote=0)),
    ("arrive", "mbarrier.arrive.relaxed.cluster one;", Arrive("one", sem="relaxed", scope="cluster")),
    ("arrive_drop", "arrive_drop one;", Arrive("one", drop=True)),
    ("arrive_drop", "arrive_drop.expect_tx one bytes 64 count 1;", Arrive("one", tx=64, drop=True)),
    ("arrive_drop", "arrive_drop.release.cluster one count 2 @ 1;",
     Arrive("one", count=2, drop=True, scope="cluster", remote=1)),
    # tx-count
    ("expect_tx", "expect_tx full[0] bytes 512;",
     ("MbarTx", {"kind": "expect", "bar": ("full", 0), "tx_bytes": 512, "remote": None})),
    ("expect_tx", "expect_tx.relaxed.cluster full[0] bytes 16 @ 1;",
     ("MbarTx", {"kind": "expect", "bar": ("full", 0), "tx_bytes": 16, "remote": 1})),
    ("complete_tx", "complete_tx one bytes 0;",
     ("MbarTx", {"kind": "complete", "bar": "one", "tx_bytes": 0, "remote": None})),
    ("complete_tx", "complete_tx.relaxed.cta one bytes BYTES @ 0;",
     ("MbarTx", {"kind": "complete", "bar": "one", "tx_bytes": 1024, "remote": 0})),
    # waits
    ("wait", "wait full[0] parity 1;",
     ("MbarWait", {"bar": ("full", 0), "parity": 1, "sem": "acquire", "scope": "cta"})),
    ("wait", "wait.acquire.cluster one parity 0;",
     ("MbarWait", {"bar": "one", "parity": 0, "sem": "acquire", "scope": "cluster"})),
    ("wait", "wait.relaxed.cta one parity 0;",
     ("MbarWait", {"bar": "one", "parity": 0, "sem": "relaxed", "scope": "cta"})),
    ("wait", "try_wait.parity one parity instance % 2;",
     ("MbarWait", {"bar": "one", "parity": ("%", "@instance", 2), "sem": "acquire", "scope": "cta"})),
    ("wait", "mbarrier.try_wait.parity.acquire.cluster one parity 1;",
     ("MbarWait", {"bar": "one", "parity": 1, "sem": "acquire", "scope": "cluster"})),
    # CTA barriers
    ("syncthreads", "syncthreads;", ("BarSync", {"bar_id": 0, "count": None})),
    ("syncthreads", "__syncthreads;", ("BarSync", {"bar_id": 0, "count": None})),
    ("syncwarp", "syncwarp;", ("Syncwarp", {})),
    ("syncwarp", "__syncwarp;", ("Syncwarp", {})),
    ("bar.sync", "bar.sync 1, 64;", ("BarSync", {"bar_id": 1, "count": 64})),
    ("bar.sync", "bar.sync 2;", ("BarSync", {"bar_id": 2, "count": None})),
    ("bar.sync", "bar.sync.aligned 3 count 128;", ("BarSync", {"bar_id": 3, "count": 128})),
    ("barrier.sync", "barrier.sync 15, 384;", ("BarSync", {"bar_id": 15, "count": 384, "aligned": False})),
    ("barrier.sync", "barrier.sync.aligned 15, 384;", ("BarSync", {"bar_id": 15, "count": 384})),
    ("bar.sync", "bar.sync sched[1];", ("BarSync", {"bar_id": 2, "count": 256})),
    ("bar.arrive", "bar.arrive 1, 64;", ("BarArrive", {"bar_id": 1, "count": 64})),
    ("barrier.arrive", "barrier.arrive.aligned 4 count 32;", ("BarArrive", {"bar_id": 4, "count": 32})),
    ("barrier.arrive", "barrier.arrive 4 count 32;", ("BarArrive", {"bar_id": 4, "count": 32, "aligned": False})),
    ("bar.arrive", "bar.arrive sched[0];", ("BarArrive", {"bar_id": 1, "count": 128})),
    # the cluster barrier
    ("cluster.arrive", "cluster.arrive;", ("ClusterArrive", {"relaxed": False})),
    ("cluster.arrive", "cluster.arrive.relaxed.aligned;", ("ClusterArrive", {"relaxed": True})),
    ("cluster.arrive", "cluster.arrive.release;", ("ClusterArrive", {"relaxed": False})),
    ("cluster.wait", "cluster.wait;", ("ClusterWait", {})),
    ("cluster.wait", "cluster.wait.acquire.aligned;", ("ClusterWait", {})),
    # data
    ("read", "read tile[1];", ("Access", {"kind": "read", "buf": ("tile", 1), "remote": None})),
    ("read", "read out @ 1;", ("Access", {"kind": "read", "buf": "out", "remote": 1})),
    ("write", "write tile[0] @ cta + 1 - 2 * cta;",
     ("Access", {"kind": "write", "buf": ("tile", 0), "remote": ("-", ("+", "@cta", 1), ("*", 2, "@cta"))})),
    ("tma.load", "tma.load tile[0] -> full[0];",
     ("TmaLoad", {"buf": ("tile", 0), "tx_bytes": 1024, "bar": ("full", 0), "multicast": None})),
    ("tma.load", "tma.load out bytes 128 -> one multicast 3;",
     ("TmaLoad", {"buf": "out", "tx_bytes": 128, "bar": "one", "multicast": 3})),
    ("tma.store", "tma.store out;", ("TmaStore", {"buf": "out", "tx_bytes": 256})),
    ("tma.store", "tma.store tile[1] bytes 64;", ("TmaStore", {"buf": ("tile", 1), "tx_bytes": 64})),
    ("bulk.commit", "bulk.commit;", ("GroupCommit", {"unit": "bulk"})),
    ("bulk.wait_read", "bulk.wait_read;", ("GroupWait", {"unit": "bulk", "pending": 0})),
    ("bulk.wait_read", "bulk.wait_read 1;", ("GroupWait", {"unit": "bulk", "pending": 1})),
    ("wgmma.read", "wgmma.read tile[0];", ("WgmmaRead", {"buf": ("tile", 0)})),
    ("wgmma.commit", "wgmma.commit;", ("GroupCommit", {"unit": "wgmma"})),
    ("wgmma.wait", "wgmma.wait;", ("GroupWait", {"unit": "wgmma", "pending": 0})),
    ("wgmma.wait", "wgmma.wait 7;", ("GroupWait", {"unit": "wgmma", "pending": 7})),
    # fences
    ("fence.proxy.async", "fence.proxy.async;", ("Fence", {"kind": "proxy_async"})),
    # the state space is kept: `.shared::cta` covers the executing CTA's shared memory only (#31)
    ("fence.proxy.async", "fence.proxy.async.shared::cta;", ("Fence", {"kind": "proxy_async", "space": "shared::cta"})),
    ("fence.proxy.async", "fence.proxy.async.shared::cluster;",
     ("Fence", {"kind": "proxy_async", "space": "shared::cluster"})),
    ("fence.proxy.async", "fence.proxy.async.global;", ("Fence", {"kind": "proxy_async", "space": "global"})),
    ("fence.proxy.async::generic.release", "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;",
     ("Fence", {"kind": "proxy_async", "space": "shared::cta", "sem": "release"})),
    ("fence.proxy.async::generic.acquire",
     "fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster;",
     ("Fence", {"kind": "proxy_async", "space": "shared::cluster", "sem": "acquire"})),
    ("fence.mbarrier_init", "fence.mbarrier_init;", ("Fence", {"kind": "mbarrier_init"})),
    ("fence.mbarrier_init", "fence.mbarrier_init.release.cluster;", ("Fence", {"kind": "mbarrier_init"})),
    # Blackwell
    ("tmem.alloc", "tmem.alloc;", ("TmemAlloc", {"dealloc": False, "cta_group": 1})),
    ("tmem.alloc", "tmem.alloc cta_group 2 cols 128;", ("TmemAlloc", {"dealloc": False, "cta_group": 2, "cols": 128})),
    ("tmem.dealloc", "tmem.dealloc cta_group 2;", ("TmemAlloc", {"dealloc": True, "cta_group": 2})),
    ("tmem.dealloc", "tmem.dealloc cols 512;", ("TmemAlloc", {"dealloc": True, "cta_group": 1, "cols": 512})),
    ("umma.commit", "umma.commit full[1];", ("UmmaCommit", {"bar": ("full", 1), "multicast": None})),
    ("umma.commit", "umma.commit one multicast 0b11;", ("UmmaCommit", {"bar": "one", "multicast": 3})),
    # the non-blocking probe, non-bulk cp.async and 1-D cp.async.bulk
    ("test_wait", "mbarrier.test_wait.parity full[0] parity 1;",
     ("MbarTestWait", {"bar": ("full", 0), "parity": 1, "sem": "acquire", "scope": "cta"})),
    ("cp.async", "cp.async.cg.shared.global tile[1];", ("CpAsync", {"buf": ("tile", 1)})),
    ("cp.async.commit_group", "cp.async.commit_group;", ("GroupCommit", {"unit": "cp_async"})),
    ("cp.async.wait_group", "cp.async.wait_group 2;", ("GroupWait", {"unit": "cp_async", "pending": 2})),
    ("cp.async.mbarrier.arrive", "cp.async.mbarrier.arrive.noinc.shared::cta.b64 full[0];",
     ("CpAsyncArrive", {"bar": ("full", 0), "noinc": True})),
    ("cp.async.mbarrier.arrive", "cp.async.mbarrier.arrive one;", ("CpAsyncArrive", {"bar": "one", "noinc": False})),
    ("cp.async.bulk", "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes tile[0] bytes 512 -> full[0] "
                      "@ 1;",
     ("TmaLoad", {"buf": ("tile", 0), "tx_bytes": 512, "bar": ("full", 0), "multicast": ("<<", 1, 1)})),
    ("cp.async.bulk", "cp.async.bulk tile[0] -> full[0];",
     ("TmaLoad", {"buf": ("tile", 0), "tx_bytes": 1024, "bar": ("full", 0), "multicast": None})),
    # tcgen05 in PTX spelling (`umma.commit` and `tmem.alloc` are the same operations)
    ("tcgen05.alloc", "tcgen05.alloc.cta_group::2.sync.aligned cols 64;",
     ("TmemAlloc", {"dealloc": False, "cta_group": 2, "cols": 64})),
    ("tcgen05.dealloc", "tcgen05.dealloc cols 64;", ("TmemAlloc", {"dealloc": True, "cta_group": 1, "cols": 64})),
    ("tmem.relinquish", "tmem.relinquish;", ("TmemRelinquish", {"cta_group": 1})),
    ("tcgen05.relinquish_alloc_permit", "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;",
     ("TmemRelinquish", {"cta_group": 2})),
    ("tcgen05.commit", "tcgen05.commit full[1];", ("UmmaCommit", {"bar": ("full", 1), "multicast": None})),
    ("tcgen05.commit", "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster one "
     "multicast 0b11;", ("UmmaCommit", {"bar": "one", "multicast": 3, "cta_group": 2})),
    ("tcgen05.mma", "tcgen05.mma acc[1], tile[0], out;",
     ("TcMma", {"kind": "mma", "acc": ("acc", 1), "operands": [("tile", 0), "out"], "cta_group": 1})),
    ("tcgen05.mma", "tcgen05.mma acc[0], tile[1] cta_group 2;",
     ("TcMma", {"kind": "mma", "acc": ("acc", 0), "operands": [("tile", 1)], "cta_group": 2})),
    ("tcgen05.cp", "tcgen05.cp acc[0], out;", ("TcMma", {"kind": "cp", "acc": ("acc", 0), "operands": ["out"],
                                                          "cta_group": 1})),
    ("tcgen05.shift", "tcgen05.shift acc[0];", ("TcMma", {"kind": "shift", "acc": ("acc", 0), "operands": [],
                                                           "cta_group": 1})),
    ("tcgen05.ld", "tcgen05.ld acc[1];", ("TmemAccess", {"kind": "ld", "region": ("acc", 1)})),
    ("tcgen05.st", "tcgen05.st.sync.aligned acc[0];", ("TmemAccess", {"kind": "st", "region": ("acc", 0)})),
    ("tcgen05.wait::ld", "tcgen05.wait::ld.sync.aligned;", ("TcWait", {"kind": "ld"})),
    ("tcgen05.wait::st", "tcgen05.wait::st;", ("TcWait", {"kind": "st"})),
    ("tcgen05.fence::before_thread_sync", "tcgen05.fence::before_thread_sync;", ("TcFence", {"kind": "before"})),
    ("tcgen05.fence::after_thread_sync", "tcgen05.fence::after_thread_sync;", ("TcFence", {"kind": "after"})),
    # global memory (docs/language.md §3.7): flags, atomics, spins, thread fences, the grid barrier, CLC
    ("atom", "flag f; atom.add.release.gpu f, 1;", ("FlagOp", {"kind": "atom", "flag": "f", "rmw": "add",
                                                              "operands": [1], "cmp": "", "sem": "release",
                                                              "scope": "gpu"})),
    ("atom", "flag f[2]; atom.cas.global.b32 f[1], 3, 4;", ("FlagOp", {"kind": "atom", "flag": ("f", 1), "rmw": "cas",
                                                                      "operands": [3, 4], "cmp": "", "sem": "relaxed",
                                                                      "scope": "gpu"})),
    ("red", "flag f; red.add.relaxed.cta f, 2;", ("FlagOp", {"kind": "red", "flag": "f", "rmw": "add", "operands": [2],
                                                             "cmp": "", "sem": "relaxed", "scope": "cta"})),
    ("st", "flag f; st.volatile f, 0;", ("FlagOp", {"kind": "st", "flag": "f", "rmw": "", "operands": [0], "cmp": "",
                                                    "sem": "relaxed", "scope": "sys"})),
    ("ld", "flag f; ld.acquire.gpu f;", ("FlagOp", {"kind": "ld", "flag": "f", "rmw": "", "operands": [], "cmp": "",
                                                    "sem": "acquire", "scope": "gpu"})),
    ("wait.until", "flag f; wait.until.acquire.gpu f >= STAGES;",
     ("FlagOp", {"kind": "wait", "flag": "f", "rmw": "", "operands": [2], "cmp": ">=", "sem": "acquire",
                 "scope": "gpu"})),
    ("probe", "flag f; probe.relaxed.cluster f == 1;", ("FlagOp", {"kind": "probe", "flag": "f", "rmw": "",
                                                                   "operands": [1], "cmp": "==", "sem": "relaxed",
                                                                   "scope": "cluster"})),
    ("fence.acq_rel", "fence.acq_rel.gpu;", ("ThreadFence", {"sem": "acq_rel", "scope": "gpu"})),
    ("fence.sc", "fence.sc.cta;", ("ThreadFence", {"sem": "sc", "scope": "cta"})),
    ("grid.sync", "grid.sync;", ("GridSync", {})),
    ("clc.try_cancel", "smem resp bytes 16; clc.try_cancel resp -> full[0];",
     ("TmaLoad", {"buf": "resp", "tx_bytes": 16, "bar": ("full", 0), "multicast": None, "clc": True})),
    ("clc.try_cancel", "smem resp bytes 16; "
     "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 resp -> full[1];",
     ("TmaLoad", {"buf": "resp", "tx_bytes": 16, "bar": ("full", 1), "multicast": None, "clc": True})),
    # tensor maps (resolve/tensormap.py)
    ("tma.load", "tensormap TA; tma.load tile[0] -> full[0] map TA;",
     ("TmaLoad", {"buf": ("tile", 0), "tx_bytes": 1024, "bar": ("full", 0), "multicast": None, "tmap": "TA"})),
    ("tensormap.replace", "tensormap TA; tensormap.replace.tile.global_address.shared::cta.b1024.b64 TA;",
     ("TensormapReplace", {"map": "TA"})),
    ("fence.proxy.tensormap::generic.release", "fence.proxy.tensormap::generic.release.gpu;",
     ("TensormapFence", {"sem": "release", "map": None, "scope": "gpu"})),
    ("fence.proxy.tensormap::generic.acquire", "tensormap TB[2]; fence.proxy.tensormap.acquire.cta TB[1];",
     ("TensormapFence", {"sem": "acquire", "map": ("TB", 1), "scope": "cta"})),
]


@pytest.mark.parametrize(("name", "stmt", "expected"), OP_CASES, ids=[c[1] for c in OP_CASES])
def test_operation(name, stmt, expected):
    assert only(stmt) == expected


def test_cp_async_wait_all_is_commit_then_wait_0():
    assert body("cp.async.wait_all;") == [("GroupCommit", {"unit": "cp_async"}),
                                          ("GroupWait", {"unit": "cp_async", "pending": 0})]


def test_the_local_arrive_form_with_a_peer_rank_is_marked():
    assert only("arrive.shared::cta full[0] @ 1;")[1]["local_form"] is True
    assert "local_form" not in only("arrive.shared::cluster full[0] @ 1;")[1]  # (default False)
    assert "local_form" not in only("arrive.shared::cta full[0];")[1]


def test_cluster_sync_is_arrive_then_wait():
    assert body("cluster.sync;") == [("ClusterArrive", {"relaxed": False}), ("ClusterWait", {})]
    assert body("cluster.sync.aligned;") == [("ClusterArrive", {"relaxed": False}), ("ClusterWait", {})]


def test_every_operation_is_covered():
    assert {c[0] for c in OP_CASES} | {"cluster.sync", "cp.async.wait_all"} == set(OPERATIONS)


def test_op_spans_point_at_the_statement():
    p = load(PRELUDE + "  arrive.release.cluster full[1] @ 1;\n}")
    op = p.body[0]
    assert isinstance(op, ir.MbarArrive)
    assert (op.span.line, op.span.column, op.span.end_column) == (15, 3, 38)
    assert (op.bar.span.column, op.remote.span.column) == (26, 36)  # type: ignore[union-attr]


def test_a_text_loaded_again_with_other_defines_is_resolved_afresh() -> None:
    """load() keeps the parse trees of the last texts it read (lang/load.py): a tree serves every load of its
    text, each resolved with its own defines, and a changed text is parsed again."""
    import importlib
    from pathlib import Path

    from syncverify.lang import load
    from syncverify.lang.parse import parse_recovering

    load_module = importlib.import_module("syncverify.lang.load")  # (the package exports the function)
    text = (Path(__file__).resolve().parent.parent / "specs" / "nvfuser_cb_no_war_wait.sync").read_text()
    changed = text.replace("param ITERS    = 6;", "param ITERS    = 5;")
    assert changed != text
    fresh = {}
    for key, source, defines in (("6", text, {}), ("3", text, {"ITERS": 3}), ("9", text, {"ITERS": 9}),
                                 ("5", changed, {})):
        load_module._parsed_trees.clear()
        fresh[key] = load(source, defines, path="cb.sync")
    for key, source, defines in (("6", text, {}), ("3", text, {"ITERS": 3}), ("5", changed, {}),
                                 ("9", text, {"ITERS": 9}), ("6", text, {})):
        assert load(source, defines, path="cb.sync") == fresh[key]
    assert fresh["3"] != fresh["9"] and fresh["5"].source == changed
    kept = load_module._parsed_trees[(text, "cb.sync")][0]
    assert kept == parse_recovering(text, "cb.sync")[0]  # resolve never changed the tree it was given
