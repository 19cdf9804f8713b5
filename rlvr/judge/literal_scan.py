"""The linear scanner behind :func:`rlvr.judge.literal.parse_literal` for plain values (``objects=None``, the host's
case): Python literals as ``repr`` writes them, and Python's other literal spellings (hex/octal/binary and ``_`` in
numbers, string prefixes, triple quotes, implicit string concatenation, comments).

One regular-expression token stream (possessive, unambiguous token patterns: matching never backtracks beyond a
token) and a recursive descent that builds the values directly, so the work is linear in the text (each set,
frozenset and dict checked first by :func:`check_hash_groups`, so that no hash table it builds degrades to quadratic:
issue 43) and the memory is that of the value it returns (at most ~40 bytes per character, ``set()`` being the
densest) plus the text, never an AST (``compile`` costs ~500 bytes per character). What it does not read raises
:class:`Unsupported`; the caller decides whether the AST may try (:mod:`rlvr.judge.literal`: short texts only).

Standard-library only, like :mod:`rlvr.judge.literal`, which imports it: the sandbox binds it read-only beside that
file (``/judge/literal_scan.py``, the top-level module ``literal_scan`` there), and the driver program of
:mod:`rlvr.judge.fallback` defines the module ``literal_scan`` from this text ahead of that file's.
"""

import _codecs
import re

__all__ = ["MAX_HASH_GROUP", "Unsupported", "check_hash_groups", "scan"]

_SQ3, _DQ3 = "'" * 3, '"' * 3
_TOKENS_SRC = (
    r"(?P<ws>(?:[ \t\n\r\f\v]++|\\\r?\n|#[^\n]*+)++)"
    r"|(?P<num>(?:0[xX](?:_?[0-9a-fA-F])++|0[oO](?:_?[0-7])++|0[bB](?:_?[01])++"
    r"|(?:[0-9](?:_?[0-9])*+(?:\.(?:[0-9](?:_?[0-9])*+)?+)?+|\.[0-9](?:_?[0-9])*+)(?:[eE][+-]?+[0-9](?:_?[0-9])*+)?+"
    r"[jJ]?+)(?![0-9A-Za-z_.]))"
    r"|(?P<str>(?P<pre>[rRbBuU]{0,2}+)(?:" + _SQ3 + r"(?:[^'\\]|\\.|'(?!''))*+" + _SQ3
    + "|" + _DQ3 + r'(?:[^"\\]|\\.|"(?!""))*+' + _DQ3
    + r"""|'(?:[^'\\\n]|\\.)*+'|"(?:[^"\\\n]|\\.)*+"))"""
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*+)"
    r"|(?P<p>[\[\](){},:+-])"
    r"|(?P<bad>.)"
)
_TOKENS = None  # compiled on first use: the sandbox's warden imports this module but never scans (wire forms use the
# AST), and every compiled pattern it holds is copied by each fork
_PREFIXES = frozenset({"", "r", "u", "b", "br", "rb"})
_NAMES = {"True": True, "False": False, "None": None, "inf": float("inf"), "nan": float("nan"),
          "infj": complex(0, float("inf")), "nanj": complex(0, float("nan"))}
_NUMERIC = (int, float, complex)
#: Most distinct values sharing one ``hash()`` (all its bits) that one set, frozenset or dict (its keys) read from a
#: literal may hold. Inserting a value into a hash table compares it with every value of its hash already there, so a
#: container of N values of one hash costs O(N^2) inside one C call holding the GIL; such groups are easy to forge
#: (integers congruent modulo 2**61 - 1, ``2.0 ** (61 * k)``, complex numbers ``a + bj`` with ``hash(a) + 1000003 *
#: hash(b)`` equal, and tuples or frozensets of such values). A value equal to a readable one has the same groups
#: (equal values hash alike), so an honest answer is readable whenever the reference value is.
MAX_HASH_GROUP = 32
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}\n]*+\}|[0-7]{1,3}|.)", re.S)


def _unescape(m):
    """One backslash escape of a str literal, decoded (a backslash before a non-ASCII character stays, as in Python)."""
    e = m.group()
    return e if not e.isascii() else _codecs.unicode_escape_decode(e.encode("ascii"))[0]


def check_hash_groups(values, limit=MAX_HASH_GROUP):
    """Raise ``ValueError`` when more than ``limit`` *distinct* values of ``values`` (a list or tuple, about to become a
    set, a frozenset or a dict's keys) share one hash (see :data:`MAX_HASH_GROUP`); ``TypeError`` for an unhashable
    value, as the container would.

    Cost, N = ``len(values)``: nothing when N <= ``limit``; else one ``hash()`` per value (linear in their sizes), a
    sort of the N hashes (C, O(N log N), no hash table over them) and, only for hashes shared by more than ``limit``
    values, an insertion of those values into one small set per hash that stops at ``limit + 1`` distinct ones: at most
    ``limit`` comparisons per value. So building the container afterwards costs at most ``limit`` comparisons per
    value too. Extra memory: two lists of N hashes."""
    if len(values) <= limit:
        return
    from _operator import eq  # here, not at the top: the sandbox's warden imports this module and never calls this

    hashes = [hash(v) for v in values]
    ordered = sorted(hashes)
    if not any(map(eq, ordered, ordered[limit:])):  # sorted: a run of more than `limit` equal hashes spans i..i+limit
        return
    hot = {ordered[i] for i in range(len(ordered) - limit) if ordered[i] == ordered[i + limit]}
    groups = {}
    for v, h in zip(values, hashes):  # noqa: B905 (no strict=: fallback drivers may run Python < 3.10)
        if h in hot:
            group = groups.setdefault(h, set())
            group.add(v)  # at most `limit` values of this hash there: at most `limit` comparisons
            if len(group) > limit:
                raise ValueError(f"not a readable literal: more than {limit} distinct values of one hash in a set or "
                                 "dict (hash flooding)")


class Unsupported(ValueError):
    """Text the scanner does not read (it may still be a literal: the AST fallback decides, for short texts)."""


class _Scanner:
    """Recursive descent over ``_TOKENS`` (see the module docstring). Raises ``ValueError`` (a bound or a
    non-literal) or :class:`Unsupported`."""

    __slots__ = ("it", "items", "kind", "long_digits", "long_left", "max_depth", "max_int_digits", "max_items", "val")

    def __init__(self, text, max_int_digits, max_long_digits, max_items, max_depth, long_digits):
        global _TOKENS
        if _TOKENS is None:
            _TOKENS = re.compile(_TOKENS_SRC, re.S)
        self.it = _TOKENS.finditer(text)
        self.max_int_digits, self.long_left, self.max_items, self.items = max_int_digits, max_long_digits, max_items, 0
        self.max_depth, self.long_digits = max_depth, long_digits
        self.advance()

    def advance(self):
        for m in self.it:
            kind = m.lastgroup
            if kind == "ws":
                continue
            if kind == "bad":
                raise Unsupported(f"stray character {m.group()!r}")
            self.kind, self.val = (kind, m) if kind in ("num", "str") else (kind, m.group())
            return
        self.kind, self.val = "end", ""

    def at(self, p):
        return self.kind == "p" and self.val == p

    def expect(self, p):
        if not self.at(p):
            raise Unsupported(f"missing {p!r}")
        self.advance()

    def number(self, m):
        tok = m.group().replace("_", "")
        if tok[-1] in "jJ":
            return complex(0, float(tok[:-1]))
        if tok[:2].lower() in ("0x", "0o", "0b"):
            digits = len(tok) - 2
        elif "." in tok or "e" in tok or "E" in tok:
            return float(tok)
        else:
            digits = len(tok)
            if digits > 1 and tok[0] == "0" and tok.strip("0"):
                raise ValueError("not a literal: leading zeros in a decimal integer")
        if digits > self.max_int_digits:
            raise ValueError(f"literal holds a number of more than {self.max_int_digits} digits")
        if digits > self.long_digits:
            self.long_left -= digits
            if self.long_left < 0:
                raise ValueError("literal holds more long-integer digits than allowed")
        return int(tok, 0)

    def string(self):
        parts, is_bytes = [], None
        while self.kind == "str":
            m = self.val
            pre = m.group("pre").lower()
            if pre not in _PREFIXES:
                raise Unsupported(f"string prefix {pre!r}")
            b = "b" in pre
            if is_bytes is not None and b != is_bytes:
                raise ValueError("not a literal: bytes and str concatenated")
            is_bytes = b
            raw = m.group()[len(pre):]
            q = 3 if len(raw) >= 6 and raw[:3] in (_SQ3, _DQ3) else 1
            body = raw[q:-q]
            if b and not body.isascii():
                raise ValueError("not a literal: non-ASCII character in bytes")
            if "\\" in body and "r" not in pre:
                if b:
                    body = _codecs.escape_decode(body.encode("ascii"))[0]
                elif body.isascii():
                    body = _codecs.unicode_escape_decode(body.encode("ascii"))[0]
                else:  # escapes one by one: unicode_escape would read the other characters as Latin-1 bytes
                    body = _ESCAPE.sub(_unescape, body)
            elif b:
                body = body.encode("ascii")
            parts.append(body)
            self.advance()
        return (b"" if is_bytes else "").join(parts)

    def seq(self, close, depth):
        out = []
        while not self.at(close):
            out.append(self.value(depth))
            if self.at(","):
                self.advance()
            elif not self.at(close):
                raise Unsupported(f"missing ',' or {close!r}")
        self.advance()
        return out

    def atom(self, depth):
        kind, val = self.kind, self.val
        if kind == "num":
            self.advance()
            return self.number(val)
        if kind == "str":
            return self.string()
        if kind == "name":
            self.advance()
            if self.at("("):
                if val not in ("set", "frozenset"):
                    raise ValueError(f"not a literal: call of {val}")
                self.advance()
                args = self.seq(")", depth)
                if len(args) > 1:
                    raise ValueError(f"not a literal: call of {val}")
                items = args[0] if args else ()
                if type(items) in (list, tuple):  # a set's, frozenset's or dict's values were checked when built
                    check_hash_groups(items)
                return set(items) if val == "set" else frozenset(items)
            if val in _NAMES:
                return _NAMES[val]
            raise ValueError(f"not a literal: Name {val}")
        if kind != "p":
            raise Unsupported("the text ends too early")
        self.advance()
        if val == "[":
            return self.seq("]", depth)
        if val == "(":
            if self.at(")"):
                self.advance()
                return ()
            first = self.value(depth)
            if self.at(")"):  # a parenthesised value, not a tuple
                self.advance()
                self.items -= 1
                return first
            self.expect(",")
            return tuple([first, *self.seq(")", depth)])
        if val == "{":
            if self.at("}"):
                self.advance()
                return {}
            first = self.value(depth)
            if self.at(":"):
                self.advance()
                keys, values = [first], [self.value(depth)]
                while self.at(","):
                    self.advance()
                    if self.at("}"):
                        break
                    keys.append(self.value(depth))
                    self.expect(":")
                    values.append(self.value(depth))
                self.expect("}")
                check_hash_groups(keys)
                return dict(zip(keys, values))  # noqa: B905 (as above); as the display: the first equal key kept, the last value
            if self.at(","):
                self.advance()
                items = [first, *self.seq("}", depth)]
                check_hash_groups(items)
                return set(items)
            self.expect("}")
            return {first}
        raise Unsupported(f"stray {val!r}")

    def unary(self, depth):
        if self.at("-") or self.at("+"):
            op = self.val
            self.advance()
            if depth > self.max_depth:
                raise ValueError(f"literal nested deeper than {self.max_depth} levels")
            v = self.unary(depth + 1)
            if type(v) not in _NUMERIC:
                raise ValueError("not a literal: UnaryOp")
            return -v if op == "-" else +v
        return self.atom(depth)

    def value(self, depth):
        depth += 1
        if depth > self.max_depth:
            raise ValueError(f"literal nested deeper than {self.max_depth} levels")
        self.items += 1
        if self.items > self.max_items:
            raise ValueError(f"literal holds more than {self.max_items} values")
        v = self.unary(depth)
        if self.at("+") or self.at("-"):
            op = self.val
            self.advance()
            w = self.unary(depth)
            if type(v) not in (int, float) or type(w) is not complex:
                raise ValueError("not a literal: BinOp")
            v = v + w if op == "+" else v - w
            if self.at("+") or self.at("-"):
                raise ValueError("not a literal: BinOp")
        return v


def scan(text, max_int_digits, max_long_digits, max_items, max_depth, long_digits):
    """The plain value ``text`` (str) is a literal of, in one pass over its tokens.

    Bounds (those of :func:`rlvr.judge.literal.parse_literal`, which passes its own): ``max_int_digits`` digits per
    integer literal; ``max_long_digits`` digits in all over the integers of more than ``long_digits`` digits;
    ``max_items`` values (scalars and containers) in all; ``max_depth`` levels of values (the top value is level 1,
    each container or unary sign adds one: ``[[1]]`` needs 3). Cost: O(len(text)) time plus the quadratic
    conversion of the long integers (bounded by ``max_long_digits``), memory of the returned value plus O(depth)
    stack. Raises ``ValueError`` for text that is not a literal or breaks a bound, :class:`Unsupported` (a
    ``ValueError``) for text the scanner does not read but that may still be a literal."""
    sc = _Scanner(text, max_int_digits, max_long_digits, max_items, max_depth, long_digits)
    try:
        v = sc.value(0)
    except TypeError as exc:  # an unhashable set element or dict key
        raise ValueError(f"not a literal: {exc}") from exc
    if sc.kind != "end":
        raise Unsupported("text after the value")
    return v
