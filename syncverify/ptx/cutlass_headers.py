"""Where CUTLASS's headers are: the `nvidia-cutlass` pip package's `cutlass_library/source/include`.

Kept apart from the host program (cutlass_host.py) so that the modules that only read CUTLASS's source --
the role names read from its branches (role_names.py) -- need nothing of extraction.
"""

from __future__ import annotations

from pathlib import Path


def cutlass_include() -> str | None:
    """CUTLASS's headers from the `nvidia-cutlass` pip package (cutlass_library/source/include), if installed."""
    try:
        import cutlass_library  # type: ignore[import-not-found]
    except ImportError:
        return None
    inc = Path(cutlass_library.__file__).parent / "source" / "include"
    return str(inc) if (inc / "cutlass" / "cutlass.h").is_file() else None
