"""Checking compiled kernels: a PTX front end and the extraction of a kernel's synchronization protocol."""
