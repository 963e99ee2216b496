"""Barrier storage (docs/language.md §3.4, docs/model.md "Barrier state"): an mbarrier declared in a buffer
slot's bytes is data before its init and after its inval. Each rule with the near twin that keeps the other
answer; the declaration's input errors; what the engines that do not support it say."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify import Options, load
from syncverify.check import check_protocol
from syncverify.cli import main
from syncverify.diagnostics import InputError
from syncverify.result import Verdict

HEAD = """protocol t {
  cta threads 64;
  role a = warp 0;
  role b = warp 1;
  smem buf bytes 64;
  smem q bytes 64;
  mbarrier mb count 1 in buf;
  mbarrier qb count 1;
"""


def run(body: str, engine: str = "explicit"):  # type: ignore[no-untyped-def]
    res = check_protocol(load(HEAD + body + "}\n", path="t.sync"), Options(engine=engine))
    return res.verdict, res.codes()


def test_a_write_over_a_live_barrier_is_sv408_and_bytes_beside_it_are_free():
    live = "if a { elect { init mb; } syncwarp; write buf; }\n"
    assert run(live) == (Verdict.VIOLATION, {"SV408"})
    # without the syncwarp the warp's other lanes are not ordered after the elected lane's init: the init
    # and their write are unordered, SV409 (as a use of the barrier by those lanes would be SV401)
    assert run(live.replace(" syncwarp;", "")) == (Verdict.VIOLATION, {"SV409"})
    assert run(live.replace("write buf;", "write buf bytes 8..64;")) == (Verdict.SAFE, set())
    assert run(live.replace("write buf;", "write buf bytes 0..8;")) == (Verdict.VIOLATION, {"SV408"})
    assert run(live.replace("write buf;", "read buf bytes 4..12;")) == (Verdict.VIOLATION, {"SV408"})


def test_after_the_inval_the_bytes_are_data_for_accesses_ordered_after_it():
    own = "if a { elect { init mb; inval mb; } syncwarp; write buf; }\n"
    assert run(own) == (Verdict.SAFE, set())
    assert run(own.replace(" syncwarp;", "")) == (Verdict.VIOLATION, {"SV408"})  # lanes 1..31: not after it
    assert run("if a { elect { init mb; inval mb; write buf; } }\n") == (Verdict.SAFE, set())  # program order
    other = "if a { elect { init mb; } }\nsyncthreads;\nif a { elect { inval mb; } }\nif b { write buf; }\n"
    assert run(other) == (Verdict.VIOLATION, {"SV408"})  # in either order: live, or the inval not known
    # b's write unordered with the init too: SV409 as well, in the interleavings where it comes first
    assert run("if a { elect { init mb; inval mb; } }\nif b { write buf; }\n")[1] == {"SV408", "SV409"}
    synced = "if a { elect { init mb; inval mb; } }\nsyncthreads;\nif b { write buf; }\n"
    assert run(synced) == (Verdict.SAFE, set())


def test_an_init_of_bytes_still_in_use_is_sv409_whichever_runs_first():
    unordered = "if a { elect { init mb; } }\nif b { read buf; }\n"
    assert run(unordered) == (Verdict.VIOLATION, {"SV409"})
    ordered = "if b { read buf; }\nsyncthreads;\nif a { elect { init mb; inval mb; } }\n"
    assert run(ordered) == (Verdict.SAFE, set())


def test_an_init_over_a_copy_in_flight_is_sv409_and_after_its_wait_is_not():
    inflight = ("if a { elect { init qb; arrive.expect_tx qb bytes 64; tma.load buf -> qb; init mb; } "
                "wait qb parity 0; }\n")
    assert run(inflight) == (Verdict.VIOLATION, {"SV409"})
    waited = ("if a { elect { init qb; arrive.expect_tx qb bytes 64; tma.load buf -> qb; } syncwarp; "
              "wait qb parity 0; elect { init mb; inval mb; } }\n")
    assert run(waited) == (Verdict.SAFE, set())


def test_an_inval_while_arrivals_may_still_come_is_sv409():
    copy = "if a { elect { init mb; arrive.expect_tx mb bytes 64; tma.load q -> mb; inval mb; } }\n"
    assert run(copy) == (Verdict.VIOLATION, {"SV409"})
    tx = "if a { elect { init mb; expect_tx mb bytes 64; inval mb; } }\n"
    assert "SV409" in run(tx)[1]  # (and SV503: bytes expected that nothing completes)
    assert run(tx.replace("inval", "complete_tx mb bytes 64; inval")) == (Verdict.SAFE, set())
    waited = "if a { elect { init mb; arrive.expect_tx mb bytes 64; tma.load q -> mb; } syncwarp; " \
             "wait mb parity 0; elect { inval mb; } }\n"
    assert run(waited) == (Verdict.SAFE, set())


def test_a_use_after_the_inval_is_sv401():
    late = "if a { elect { init mb; } }\nsyncthreads;\nif a { elect { inval mb; } }\nif b { elect { arrive mb; } }\n"
    assert run(late)[1] == {"SV401"}
    in_time = ("if a { elect { init mb; } }\nsyncthreads;\nif b { elect { arrive mb; } }\n"
               "if a { wait mb parity 0; elect { inval mb; } }\n")
    assert run(in_time) == (Verdict.SAFE, set())


def test_bytes_can_be_a_barrier_data_and_a_barrier_again():
    """Init, inval, the bytes as data, a re-init ordered after the data's last use, a phase, inval."""
    body = ("if a { elect { init mb; inval mb; } syncwarp; write buf; }\nsyncthreads;\n"
            "if b { read buf; }\nsyncthreads;\n"
            "if a { elect { init mb; arrive mb; } syncwarp; wait mb parity 0; elect { inval mb; } }\n")
    assert run(body) == (Verdict.SAFE, set())
    # b's read moved past the barrier: unordered with the re-init (SV409) and with the second inval (SV408)
    assert run(body.replace("if b { read buf; }\nsyncthreads;\n", "syncthreads;\nif b { read buf; }\n")) == \
        (Verdict.VIOLATION, {"SV408", "SV409"})


@pytest.mark.parametrize("body", [
    "if a { elect { init mb; } write buf; }\n",
    "if a { elect { init mb; inval mb; } }\nif b { write buf; }\n",
    "if a { elect { init mb; inval mb; } }\nsyncthreads;\nif b { write buf; }\n",
    "if a { elect { init mb; } }\nif b { read buf; }\n",
])
def test_the_z3_engine_gives_the_explicit_answer(body):
    assert run(body, "z3") == run(body)


def test_bmc_refuses_with_the_reason():
    res = check_protocol(load(HEAD + "if a { elect { init mb; inval mb; } write buf; }\n}\n", path="t.sync"),
                         Options(engine="bmc"))
    assert res.verdict is Verdict.INCONCLUSIVE and "a barrier in a buffer's bytes" in res.coverage


def test_the_promela_export_and_the_emitter_refuse_with_the_reason(tmp_path: Path, capsys):  # type: ignore[no-untyped-def]
    spec = tmp_path / "t.sync"
    spec.write_text(HEAD + "if a { elect { init mb; inval mb; } write buf; }\n}\n")
    assert main(["export", "--promela", str(spec), "-o", str(tmp_path / "t.pml")]) == 2
    assert "a barrier in a buffer's bytes (mbarrier mb in buf[0] at 0" in capsys.readouterr().err
    assert main(["emit", str(spec), "-o", str(tmp_path / "t.cu")]) == 2
    assert "whose bytes a buffer slot shares is not emitted" in capsys.readouterr().err
    assert not (tmp_path / "t.pml").exists() and not (tmp_path / "t.cu").exists()


@pytest.mark.parametrize(("decl", "code", "where"), [
    ("mbarrier m count 1 in nobuf;", "SV101", "t.sync:3:25"),
    ("mbarrier m count 1 in buf[2];", "SV104", "t.sync:3:29"),
    ("mbarrier m count 1 in buf[0] at 4;", "SV104", "t.sync:3:35"),
    ("mbarrier m[4] count 1 in buf[1] at 40;", "SV104", "t.sync:3:38"),
])
def test_a_bad_placement_is_an_input_error_at_its_place(decl, code, where, tmp_path, capsys):  # type: ignore[no-untyped-def]
    text = f"protocol t {{\n  cta threads 32;\n  {decl}\n}}\n"
    if "nobuf" not in decl:
        text = text.replace("  mbarrier", "  smem buf[2] bytes 64;\n  mbarrier")
        where = where.replace(":3:", ":4:")
    with pytest.raises(InputError) as err:
        load(text, path="t.sync")
    assert [d.code for d in err.value.diagnostics] == [code]
    spec = tmp_path / "t.sync"
    spec.write_text(text)
    assert main(["check", str(spec)]) == 2
    out = capsys.readouterr()
    assert f"{code}" in out.out + out.err and "Traceback" not in out.out + out.err
    assert where.split(":", 1)[1] in out.out + out.err


def test_the_buffer_must_be_declared_before_the_barrier():
    text = "protocol t {\n  cta threads 32;\n  mbarrier m count 1 in buf;\n  smem buf bytes 64;\n}\n"
    with pytest.raises(InputError) as err:
        load(text, path="t.sync")
    assert [d.code for d in err.value.diagnostics] == ["SV101"]


def test_a_barrier_in_a_slot_takes_no_shared_memory_of_its_own():
    """SV509 counts 8 bytes per mbarrier, but not for one that lies in a buffer's bytes."""
    big = "protocol t {{\n  cta threads 32;\n  smem buf bytes 232448;\n  mbarrier m count 1{where};\n}}\n"
    assert "SV509" not in check_protocol(load(big.format(where=" in buf"), path="t.sync"), Options()).codes()
    assert "SV509" in check_protocol(load(big.format(where=""), path="t.sync"), Options()).codes()
