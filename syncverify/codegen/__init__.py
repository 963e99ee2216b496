"""CUDA code generation: a verified protocol as a runnable sm_90a kernel that checks itself.

``emit`` returns the kernel source and the JSON launch description that
``syncverify.gpu.runner`` consumes on a machine with a GPU (and nothing of
syncverify's front end or checker).
"""

from .base import EmitRefused
from .emit import Emission, emit
from .replay import ReplayOrder, replay_order

__all__ = ["Emission", "EmitRefused", "ReplayOrder", "emit", "replay_order"]
