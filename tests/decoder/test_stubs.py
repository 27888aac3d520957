"""The compiled twin's stub (``_decoder_c.pyi``) says what the pure twin says: the same
public methods and properties, the same parameters, annotations and return types.

mypy reads the stub for ``CDecoder``; if it drifted from the twin it describes, typed
callers would be told something the code does not do.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import ssewire
from tests.support.twins import TWINS, twin

SRC = pathlib.Path(ssewire.__file__).resolve().parent
PAIRS = [("CDecoder", "PyDecoder"), ("CRawDecoder", "PyRawDecoder")]


def _members(path: pathlib.Path, cls: str) -> dict[str, tuple]:
    """Public defs of ``cls`` (``TYPE_CHECKING`` blocks included) as comparable tuples."""
    tree = ast.parse(path.read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    defs = [n for n in ast.walk(node) if isinstance(n, ast.FunctionDef)]
    out = {}
    for d in defs:
        if d.name.startswith("_") and d.name != "__init__":
            continue
        args = d.args
        params = [
            (a.arg, ast.unparse(a.annotation) if a.annotation else None)
            for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
        ]
        defaults = (len(args.defaults), sum(d is not None for d in args.kw_defaults))
        decorators = [ast.unparse(x) for x in d.decorator_list]
        out[d.name] = (
            params,
            len(args.kwonlyargs),
            defaults,
            decorators,
            ast.unparse(d.returns) if d.returns else None,
        )
    return out


@pytest.mark.parametrize(("compiled", "pure"), PAIRS)
def test_the_stub_matches_the_pure_twin(compiled, pure):
    stub = _members(SRC / "_decoder_c.pyi", compiled)
    twin_defs = _members(SRC / "_decoder_py.py", pure)
    assert stub == twin_defs
    if compiled == "CDecoder":  # the base class: the whole public surface
        assert set(stub) == {"__init__", "last_event_id", "retry", "comments", "discarded", "feed", "close"}


@pytest.mark.parametrize(("compiled", "pure"), PAIRS)
def test_the_compiled_twin_has_what_its_stub_declares(compiled, pure):
    if "c" not in TWINS:
        pytest.skip("pure install: no compiled twin to check")  # the stub is still checked above
    cls = twin("c", raw=compiled == "CRawDecoder")
    declared = set(_members(SRC / "_decoder_c.pyi", "CDecoder"))
    public = {name for name in dir(cls) if not name.startswith("_")} | {"__init__"}
    assert declared <= public
    assert public - declared <= set(dir(object))
