"""The live probe: its checks (``checks/``, sans-IO generators: requests out, verdicts in)
and its driver (``driver.py``, which sends those requests over the one transport path).

This package's own module imports nothing, so ``ssewire.mcp`` can register the checks'
diagnostics without importing any I/O."""
