"""Where CUTLASS's headers are: the `nvidia-cutlass` pip package's `cutlass_library/source/include`.

Kept apart from the host program (cutlass_host.py) so that the modules that only read CUTLASS's source --
the role names read from its branches (role_names.py) -- need nothing of extraction.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path


def cutlass_include() -> str | None:
    """CUTLASS's headers from the `nvidia-cutlass` pip package (cutlass_library/source/include), if installed.
    The package is found, not imported: importing it (its generator's modules, and `socket` through them) took
    a fiftieth of a second of each `--cutlass-problem` check, for its path."""
    spec = find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        return None
    inc = Path(spec.origin).parent / "source" / "include"
    return str(inc) if (inc / "cutlass" / "cutlass.h").is_file() else None
