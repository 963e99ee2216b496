"""Package data: the diagnostics reference (diagnostics.md), read by `syncverify explain`."""
