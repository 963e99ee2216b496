"""The model: what a protocol's warps and asynchronous agents can do, step by step.

`machine.py` offers the initial state, every enabled step and the step function; `footprint.py`
what a step touches; `program.py` each process's compiled code; `state.py` the state and its
knowledge records; `rules.py` the barrier arithmetic, written once over Python integers or Z3
terms; `families/` one module per primitive family. Nothing here knows how the model is
searched (docs/architecture.md)."""
