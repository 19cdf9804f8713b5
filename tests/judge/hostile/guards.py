"""Guard bypasses: return values that compare equal to anything (or to the expected value) without being it, and
entry points that are not plain functions. Each is judged on call tests and on assert tests."""

from __future__ import annotations

from . import hostile

G = "guards"
T = "call assert_mbpp assert_he"

_ANY = """
class AnyEq:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
    def __repr__(self): return "7"
"""

PROGRAMS = [
    hostile("eq_override", G, T, _ANY + "def add(a, b):\n    return AnyEq()\n", "__eq__ always True"),
    hostile("eq_on_metaclass_instance", G, T, """
        class Meta(type):
            def __eq__(cls, other): return True
            __hash__ = type.__hash__
        class X(metaclass=Meta):
            pass
        def add(a, b):
            return X
        """, "returns a class whose metaclass compares equal to everything"),
    hostile("userlist_data", G, T, _ANY + """
from collections import UserList
def add(a, b):
    u = UserList()
    u.data = AnyEq()
    return u
""", "stdlib UserList whose .data compares equal to anything"),
    hostile("userstring_data", G, T, _ANY + """
from collections import UserString
def add(a, b):
    u = UserString("")
    u.data = AnyEq()
    return u
""", "stdlib UserString whose .data compares equal to anything"),
    hostile("userdict_data", G, T, _ANY + """
from collections import UserDict
def add(a, b):
    u = UserDict()
    u.data = AnyEq()
    return u
""", "stdlib UserDict whose .data compares equal to anything"),
    hostile("weakref_proxy", G, T, _ANY + """
import weakref
_keep = AnyEq()
def add(a, b):
    return weakref.proxy(_keep)
""", "weakref.proxy (a builtin type) forwarding __eq__ to a hostile object"),
    hostile("mappingproxy", G, T, """
        import types
        class D(dict):
            def __eq__(self, other): return True
            __hash__ = None
        def add(a, b):
            return types.MappingProxyType(D())
        """, "types.MappingProxyType over a dict subclass with __eq__ True"),
    hostile("numpy_0d_object", G, T, _ANY + """
import numpy as np
def add(a, b):
    return np.array(AnyEq(), dtype=object)
""", "0-d numpy object array holding a hostile object"),
    hostile("numpy_wrong_scalar", G, T, """
        import numpy as np
        def add(a, b):
            return np.array([a + b, 0])
        """, "numpy array whose == is elementwise (truthiness of a partial match)"),
    hostile("callable_class_entry", G, T, _ANY + """
class add:
    def __new__(cls, *a, **k):
        return AnyEq()
""", "the entry point is a class whose construction returns a hostile object"),
    hostile("callable_instance_entry", G, T, _ANY + """
class _Adder:
    def __call__(self, *a, **k):
        return AnyEq()
add = _Adder()
""", "the entry point is a callable instance (not a function, so not wrapped)"),
    hostile("partial_entry", G, T, _ANY + """
import functools
add = functools.partial(lambda *a, **k: AnyEq())
""", "functools.partial as the entry point"),
    hostile("module_entry", G, T, _ANY + """
import types
class _M(types.ModuleType):
    def __call__(self, *a, **k):
        return AnyEq()
add = _M("add")
""", "a callable module object as the entry point"),
    hostile("builtin_entry_wrong", G, T, "add = max\n", "a builtin (max) as the entry point: wrong values"),
    hostile("float_subclass", G, T, """
        class F(float):
            def __eq__(self, o): return True
            __hash__ = float.__hash__
        def add(a, b):
            return F(0.0)
        """, "float subclass with __eq__ True"),
    hostile("int_subclass_no_dunder", G, T, """
        class I(int):
            pass
        def add(a, b):
            return I(a - b)
        """, "int subclass (wrong value) with an inherited __eq__"),
    hostile("str_subclass", G, T, """
        class S(str):
            def __eq__(self, o): return True
            __hash__ = str.__hash__
        def add(a, b):
            return S("x")
        """, "str subclass with __eq__ True"),
    hostile("list_subclass", G, T, """
        class L(list):
            def __eq__(self, o): return True
            __hash__ = None
        def add(a, b):
            return L()
        """, "list subclass with __eq__ True"),
    hostile("fake_class_attr", G, T, """
        class X:
            __class__ = int
            def __eq__(self, o): return True
            __hash__ = object.__hash__
        def add(a, b):
            return X()
        """, "lies about its __class__ (isinstance(x, int) is True)"),
    hostile("nan_for_float", G, "float_call", """
        def half(x):
            return float("nan")
        """, "NaN where a float is expected (every ordered comparison is False)"),
    hostile("inf_for_float", G, "float_call", """
        def half(x):
            return float("inf")
        """, "inf where a float is expected"),
    hostile("huge_int_for_float", G, "float_call", """
        import sys
        if hasattr(sys, "set_int_max_str_digits"):
            sys.set_int_max_str_digits(0)
        def half(x):
            return 10 ** 200000
        """, "a 200,000-digit int where a float is expected"),
    hostile("patch_int_eq_ctypes", G, "call assert_mbpp", """
        import ctypes, gc
        def always(a, b): return True
        try:
            d = gc.get_referents(int.__dict__)[0]
            d["__eq__"] = always
            ctypes.pythonapi.PyType_Modified(ctypes.py_object(int))
        except Exception:
            pass
        def add(a, b):
            return 0
        """, "forbiddenfruit-style patch of int.__eq__ through the type's real dict"),
]
