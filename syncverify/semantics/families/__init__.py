"""One module per primitive family: the explicit semantics of its operations (a mixin the
Machine inherits, with its handler table) and their Z3 encoding for the bmc engine (a mixin of
its Step, with its event table), written in the vocabulary of encoding/ (the record spaces, the
unrolled events, a step's effects, the interface of the engine's layout), so that the families
import nothing from the engine. Adding a primitive touches its family module, rules.py and the
exporters."""
