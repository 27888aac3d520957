"""Deprecated: the I/O half of ``ssewire.mcp`` now has a folder per component (``client``,
``transport``, ``probe``, ``reference``, ``gateway``, ``server``). The modules of this
package forward to their new homes, with a `DeprecationWarning`, for one release."""
