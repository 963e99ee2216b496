"""Outcomes of GPU runs, what they mean in spec terms, and whether they agree with the verdict.

Pure Python with no imports beyond the standard library: the runner uses it on
the GPU machine (where only cuda.core and numpy exist) and the CLI uses it
where the checker runs. Everything it needs to explain a run (process labels,
spec lines, barrier names) comes from the launch description.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

COMPLETED, HANG, CORRUPT, FAULT, ERROR = "completed", "hang", "corrupt", "fault", "error"
REPLAY_FAILED = "replay-failed"  # the forced order could not be followed: says nothing about the protocol


@dataclass
class Rep:
    """One repetition: its class and the facts behind it."""

    status: str
    ms: float = 0.0
    stuck: list[dict[str, Any]] = field(default_factory=list)  # where each blocked process stopped
    corrupt: dict[str, Any] = field(default_factory=dict)  # counts and the first wrong reads
    error: str = ""
    unchecked: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "ms": self.ms, "stuck": self.stuck, "corrupt": self.corrupt,
                "error": self.error, "unchecked": self.unchecked}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Rep:
        return Rep(d["status"], d.get("ms", 0.0), d.get("stuck", []), d.get("corrupt", {}), d.get("error", ""),
                   d.get("unchecked", 0))


# --------------------------------------------------------------------------- decoding


def decode_stamp(launch: dict, word: int) -> str:
    """A stamp as `writer line L (k-th)`: who wrote the slot content that was seen or expected."""
    if word == 0:
        return "nobody (initial content)"
    writer = (word >> 16) - 1
    occ = word & 0xFFFF
    nsites = launch["nsites"]
    procs = launch["processes"]
    proc, site = divmod(writer, nsites)
    if not 0 <= proc < len(procs) or not 0 <= site < nsites:
        return f"garbage {word:#010x}"
    s = launch["sites"][site]
    return f"{procs[proc]['label']}@cta{procs[proc]['cta']} line {s['line']} `{s['op']}` #{occ}"


def _iteration(launch: dict, site: int, values: list[int], n: int) -> str:
    if not 0 <= site < len(launch["sites"]):
        return ""
    names = launch["sites"][site].get("loops", [])[-3:]
    return " ".join(f"{name}={v}" for name, v in zip(names, values[:n], strict=False))


def describe_status(launch: dict, cta_global: int, local: int, words: list[int]) -> dict[str, Any]:
    """A process's status words as a record: where it is (or was stuck), in spec terms."""
    st = launch["status"]
    states = {v: k for k, v in st["states"].items()}
    ppc = launch["procs_per_cta"]
    cta = cta_global % launch["cluster"]
    proc = launch["processes"][cta * ppc + local]
    site = words[st["site"]]
    obj = words[st["obj"]]
    state = states.get(words[st["state"]], "not started")
    rec: dict[str, Any] = {"cta": cta_global, "process": proc["label"], "role": proc["role"] or "cta",
                           "state": state, "line": words[st["line"]], "proc": cta * ppc + local,
                           "site": site, "occurrence": words[st["occ"]]}
    if 0 <= site < len(launch["sites"]) and state not in ("not started", "done"):
        s = launch["sites"][site]
        rec["op"] = s["op"]
        rec["iteration"] = _iteration(launch, site, words[st["iters"]:st["iters"] + 3], words[st["niter"]])
        if s["kind"] == "MbarWait" and obj < len(launch["mbarriers"]):
            rec["barrier"] = launch["mbarriers"][obj]
            rec["parity"] = words[st["parity"]]
        elif s["kind"] == "BarSync":
            rec["barrier"] = f"named barrier {obj}"
        elif s["kind"] == "ClusterWait":
            rec["barrier"] = "cluster barrier"
        if state == "replay_stuck":
            rec["line"] = s["line"]
            rec["waiting_for_turn"] = obj
    return rec


def stuck_from_status(launch: dict, status: list[int], finished: bool) -> list[dict[str, Any]]:
    """Every process that did not run to its end, and where it stopped.

    A kernel that finished drained after a watchdog fired: the processes that timed out or were released
    by the abort are the blocked ones. A kernel still running at the deadline: every process not done,
    with its last recorded position (barrier waits record their line before they block)."""
    words = launch["status"]["words"]
    base = launch["status"]["stuck_base"]
    ppc = launch["procs_per_cta"]
    st = launch["status"]["states"]
    out = []
    for i in range(len(status) // words):
        rec = status[i * words:(i + 1) * words]
        if rec[base + launch["status"]["state"]]:  # a watchdog record: kept even after the kernel drained
            out.append(describe_status(launch, i // ppc, i % ppc, rec[base:]))
        elif not finished and rec[launch["status"]["state"]] != st["done"]:
            out.append(describe_status(launch, i // ppc, i % ppc, rec))
    return out


def describe_records(launch: dict, ctl: list[int]) -> list[dict[str, Any]]:
    c = launch["ctl"]
    n = min(ctl[c["bad_events"]], c["max_records"])
    out = []
    for i in range(n):
        r = ctl[c["records"] + i * c["record_words"]: c["records"] + (i + 1) * c["record_words"]]
        cta, proc, site, occ, slot, expected, seen, word, kind = r[:9]
        s = launch["sites"][site] if site < len(launch["sites"]) else {"line": 0, "op": "?"}
        buf = launch["buffers"][(slot >> 16) & 0xFF]["name"] if ((slot >> 16) & 0xFF) < len(launch["buffers"]) \
            else "?"
        rec = {"cta": cta, "reader": launch["processes"][proc]["label"] if proc < len(launch["processes"]) else "?",
               "proc": proc, "site": site, "line": s["line"], "op": s["op"], "occurrence": occ,
               "slot": f"{buf}[{slot & 0xFFFF}]@cta{slot >> 24}", "expected": decode_stamp(launch, expected)}
        if kind == 1:
            rec["seen"] = f"wgmma result {seen} (want {_wgmma_value(expected)}); " + _wgmma_writer(launch, seen)
        else:
            rec["seen"] = decode_stamp(launch, seen)
            rec["word"] = word
        out.append(rec)
    return out


def _wgmma_value(stamp: int) -> int:
    return 8 * sum(((stamp >> (8 * i)) & 0xFF) ** 2 for i in range(4))


def _wgmma_writer(launch: dict, value: int) -> str:
    """wgmma reports a sum, not a stamp: name the writes whose content would give it."""
    candidates = set(launch["sources"]["stamps"]) | set(launch["expected"]) | {0}
    hits = [decode_stamp(launch, w) for w in sorted(candidates) if _wgmma_value(w) == value]
    return "consistent with " + (" or ".join(hits[:2]) if hits else "no single write (a mix of two writes)")


def trace_step(launch: dict, proc: int, site: int, occurrence: int) -> str:
    """Where in the replayed counterexample an event is: `step i/N: <trace line>`, or "" when the event
    is not one of the counterexample's steps (or the kernel replays none)."""
    replay = launch.get("replay") or {}
    events = replay.get("events") or [s[:3] for s in replay.get("steps", [])]
    trace = replay.get("trace", [])
    for i, e in enumerate(events):
        if list(e) == [proc, site, occurrence]:
            return f"step {i + 1}/{len(events)} of the counterexample: {trace[i] if i < len(trace) else '?'}"
    return ""


def _annotate(launch: dict, recs: list[dict[str, Any]]) -> None:
    for r in recs:
        if "proc" in r and "site" in r:
            where = trace_step(launch, r["proc"], r["site"], r.get("occurrence", -1))
            if where:
                r["trace_step"] = where


def check_stores(launch: dict, dst: list[int], grid: int) -> dict[str, Any]:
    """Bulk stores: each destination region must hold the stamp its source slot had when the store read it."""
    st = launch["stores"]
    words, regions = st["region_words"], st["regions"]
    bad, first = 0, None
    # each store's word-by-word expectation; a store of a region buffer: each segment of its source holds
    # the stamp of its own writer
    segments = st.get("segments") or [None] * len(st["expected"])
    wants = []
    for r, (stamp, nbytes) in enumerate(zip(st["expected"], st["bytes"], strict=True)):
        want_of = [stamp] * (nbytes // 4)
        for lo, hi, seg_stamp in segments[r] or ():
            want_of[lo:hi] = [seg_stamp] * (hi - lo)
        wants.append(want_of)
    for g in range(grid):
        for r, want_of in enumerate(wants):
            base = (g * regions + r) * words
            for w in range(len(want_of)):
                want = want_of[w]
                if dst[base + w] != want:
                    bad += 1
                    if first is None:
                        first = {"region": r, "expected": decode_stamp(launch, want),
                                 "seen": decode_stamp(launch, dst[base + w]), "word": w}
                        who = st.get("who", [])
                        if r < len(who):
                            p, site, occ = who[r]
                            s = launch["sites"][site]
                            first.update(proc=p, site=site, occurrence=occ, line=s["line"], op=s["op"],
                                         store=launch["processes"][p]["label"])
                            where = trace_step(launch, p, site, occ)
                            if where:
                                first["trace_step"] = where
    return {"bad_words": bad, "first": first} if bad else {}


def classify(launch: dict, finished: bool, status: list[int], ctl: list[int] | None, dst: list[int] | None,
             ms: float, fault: str = "") -> Rep:
    if fault:
        stuck = stuck_from_status(launch, status, False)
        _annotate(launch, stuck)
        return Rep(FAULT, ms, stuck, error=fault)
    stuck = stuck_from_status(launch, status, finished)
    _annotate(launch, stuck)
    if not finished:
        return Rep(HANG, ms, stuck, error="kernel still running at the deadline (a barrier without a watchdog)")
    assert ctl is not None
    c = launch["ctl"]
    unchecked = ctl[c["unchecked"]]
    if any(s["state"] == "replay_stuck" for s in stuck):
        return Rep(REPLAY_FAILED, ms, stuck, unchecked=unchecked,
                   error="a warp waited in vain for its turn in the replayed order; the kernel drained")
    if stuck or ctl[c["abort"]]:
        seen: dict[str, Any] = {}
        if ctl[c["bad_words"]] or ctl[c["wgmma_bad"]]:  # data it read before it hung is evidence too
            first = describe_records(launch, ctl)
            _annotate(launch, first)
            seen = {"bad_words": ctl[c["bad_words"]], "bad_reads": ctl[c["bad_events"]],
                    "wgmma_bad": ctl[c["wgmma_bad"]], "first": first}
        return Rep(HANG, ms, stuck, corrupt=seen, unchecked=unchecked, error="watchdog fired; the kernel drained")
    corrupt: dict[str, Any] = {}
    if ctl[c["bad_words"]] or ctl[c["wgmma_bad"]]:
        first = describe_records(launch, ctl)
        _annotate(launch, first)
        corrupt = {"bad_words": ctl[c["bad_words"]], "bad_reads": ctl[c["bad_events"]],
                   "wgmma_bad": ctl[c["wgmma_bad"]], "first": first}
    stores = check_stores(launch, dst or [], launch["grid"]) if launch["stores"]["expected"] else {}
    if stores:
        corrupt["stores"] = stores
    if corrupt:
        return Rep(CORRUPT, ms, corrupt=corrupt, unchecked=unchecked)
    return Rep(COMPLETED, ms, unchecked=unchecked)


# --------------------------------------------------------------------------- summaries and agreement


def traced(rep: Rep) -> str:
    """The counterexample step a repetition's evidence names (wrong data first, then where it hung), or ""."""
    c = rep.corrupt or {}
    for f in c.get("first", []):
        if f.get("trace_step"):
            return f["trace_step"]
    first = (c.get("stores") or {}).get("first") or {}
    if first.get("trace_step"):
        return first["trace_step"]
    for s in rep.stuck:
        if s.get("trace_step"):
            return s["trace_step"]
    return ""


def summary(reps: list[Rep]) -> str:
    counts = Counter(r.status for r in reps)
    return ", ".join(f"{k} {v}/{len(reps)}" for k, v in sorted(counts.items()))


def stuck_lines(rep: Rep) -> set[int]:
    return {s["line"] for s in rep.stuck if s.get("line")}


_BLOCKED = re.compile(r"(\S+) line (\d+):")


def model_blocked_lines(message: str) -> set[int]:
    """The spec lines an SV201 counterexample says processes are blocked at."""
    return {int(m.group(2)) for m in _BLOCKED.finditer(message.split("Blocked:", 1)[-1])}


RACES = ("SV301", "SV302", "SV303", "SV601")  # races: the replay's wrong data must be at a step of the order


NOT_FORCED = "not forced"  # agreement's reason for a clean run of a replay that cannot show its violation


def agreement_word(agree: bool, why: str) -> str:
    """How a report prints an agreement: a replay that cannot show its violation neither agrees nor disagrees."""
    return "AGREES" if agree else "NOT FORCED" if f": {NOT_FORCED}," in why else "DISAGREES"


def agreement(errors: set[str], blocked: set[int], reps: list[Rep], replay: dict | None = None) -> tuple[bool, str]:
    """Does the hardware behave as the verdict says? (design §5)

    safe: completed with clean data in every repetition. SV201: every repetition hangs, at the lines the
    counterexample names. Any other violation: it must show as a hang, corruption or fault at least once;
    a violation that never shows is reported as not reproduced (timing hid it), not as agreement.

    ``replay`` is the launch's replay description, for a replay kernel. When it forces a race's order (its
    counterexample is a race and its steps are gated),
    wrong data counts as the bug only where it is at a step of that order: the expected data
    of the other reads follows one intended schedule, which the free steps after the order need not take,
    so wrong data elsewhere is no evidence of the race the report names. A replay the emitter marks
    ``not_forced`` (no hold makes the violation visible as data) is not counted as agreement when clean."""
    if not reps:
        return False, "no runs"
    counts = Counter(r.status for r in reps)
    n = len(reps)
    if any(r.status == ERROR for r in reps):
        return False, f"runner error: {next(r.error for r in reps if r.status == ERROR)}"
    if counts[REPLAY_FAILED]:
        return False, f"the replay could not follow the counterexample ({summary(reps)}): no evidence either way"
    if not errors:
        if counts[COMPLETED] == n:
            return True, f"safe and completed with clean data {n}/{n}"
        return False, f"safe, but {summary(reps)}"
    if "SV201" in errors:
        hung = [r for r in reps if r.status == HANG]
        if len(hung) < n:
            return False, f"deadlock predicted, but {summary(reps)}"
        if blocked:
            off = [r for r in hung if not stuck_lines(r) or not stuck_lines(r) <= blocked]
            if off:
                return False, (f"hang {n}/{n}, but at lines {sorted(stuck_lines(off[0]))}, the counterexample "
                               f"names {sorted(blocked)}")
            return True, f"hang {n}/{n} at lines {sorted(set().union(*(stuck_lines(r) for r in hung)))} as the " \
                         "counterexample says"
        return True, f"hang {n}/{n}"
    bad = [r for r in reps if r.status in (HANG, CORRUPT, FAULT)]
    codes = ", ".join(sorted(errors))
    forced = bool(replay and replay.get("steps")) and (replay or {}).get("code") in RACES
    if forced and bad and not any(traced(r) for r in bad):
        return False, (f"{codes}: {summary(reps)}, but not at the counterexample's step (the first wrong data is "
                       "at a step the replay does not force): no evidence of the race it names")
    if bad:
        return True, f"{codes}: the bug showed ({summary(reps)})"
    why = (replay or {}).get("not_forced")
    if why:
        return False, f"{codes}: {NOT_FORCED}, completed with clean data {n}/{n} ({why})"
    return False, f"{codes}: not reproduced, completed with clean data {n}/{n} (timing hid it)"
