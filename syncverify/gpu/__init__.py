"""Running emitted kernels on a GPU.

The modules here import nothing else of syncverify, so that ``runner.py`` can
run by path on a machine that has only cuda.core, cuda.bindings and numpy.
"""
