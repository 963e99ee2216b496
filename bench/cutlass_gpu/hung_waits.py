"""The waits a deadlock counterexample leaves blocked, each with its warps and its CUTLASS call sites, so that
cutlass_run.py can set them beside where cuda-gdb finds each warp of the hung kernel.

    python3 bench/cutlass_gpu/hung_waits.py CHECK.json EXTRACTED.sync > CHECK.waits.json

CHECK.json is `syncverify check --format json` of the kernel (check.sh); EXTRACTED.sync is `syncverify
extract` of the same PTX at the same launch, whose statements carry their CUTLASS line and the line it is
inlined at as comments. The SV201 message names each blocked thread as ROLE.wN with the protocol line it waits
at; the line's comment gives the call sites, and for a wait whose spin tests the phase again at another
try_wait (`; retried at ...`), that one's call sites too (`retry_sites`): a thread blocked there is at
the wait. Standard library only: the GPU machine reads the output as is.
"""

from __future__ import annotations

import json
import re
import sys

BLOCKED_RE = re.compile(r"(\S+)\.w(\d+) line (\d+): (wait on \S+ for parity \d)")
SITE_RE = re.compile(r"//\s*(\S+:\d+)(?: \(inlined at (\S+:\d+)\))?(?:, ptx:(\d+))?")
# a wait read from a spin whose false outcome tests the phase again at another try_wait (CUTLASS's
# consumer_try_wait, then consumer_wait): a thread blocked at that wait spins there
RETRY_RE = re.compile(r"; retried at (\S+:\d+)(?: \(inlined at (\S+:\d+)\))?(?:, ptx:(\d+))?")


def hung_waits(check: dict, sync_text: str) -> list[dict]:
    """One entry per protocol line some warp is blocked at: the warps, the wait, its call sites (innermost
    first) and PTX line. Empty where the check found no deadlock."""
    lines = sync_text.splitlines()
    groups: dict[int, dict] = {}
    for res in check.get("results", []):
        for diag in res.get("diagnostics", []):
            if diag.get("code") != "SV201":
                continue
            for _role, warp, line, wait in BLOCKED_RE.findall(diag.get("message", "")):
                n = int(line)
                g = groups.get(n)
                if g is None:
                    text = lines[n - 1] if 0 < n <= len(lines) else ""
                    site, retry = SITE_RE.search(text), RETRY_RE.search(text)
                    g = groups[n] = {"protocol_line": n, "wait": wait, "warps": [],
                                     "sites": [s for s in (site.groups()[:2] if site else ()) if s],
                                     "ptx_line": int(site.group(3)) if site and site.group(3) else None}
                    if retry:
                        g["retry_sites"] = [s for s in retry.groups()[:2] if s]
                g["warps"].append(int(warp))
    return [dict(g, warps=sorted(set(g["warps"]))) for _, g in sorted(groups.items())]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        check = json.load(fh)
    with open(argv[1], encoding="utf-8") as fh:
        text = fh.read()
    json.dump(hung_waits(check, text), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
