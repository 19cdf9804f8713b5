"""Host-side work (issue 28): wrong programs whose *output* is shaped to make the host's comparison, tokenising or
literal parsing superlinear in what they printed or returned (near-miss float tokens, digit runs, many tiny lines,
one huge line, deep and wide literals, dense empty containers, long integers, escapes).

Generated: every family at several sizes (64 KiB to 4 MiB of output). Every program is wrong for its probe, so the
verdict must be a failure; and since the host's readers are linear and bounded by the expected value
(docs/judge/threat-model.md, "Host-side work on submission output"), judging one must not take long (the quadratic
readers these replace needed hours for the 1 MiB cases).
"""

from __future__ import annotations

from . import Hostile, hostile

H = "host_work"
SIZES = (1 << 16, 1 << 20, 1 << 22)

# stdout families on the float-tolerance probe (expected "0.5"), as Python expressions of the size n
_FLOAT_OUTPUTS = {
    "digits_then_letter": '"1" * n + "x"',
    "digit_run_fraction": '"0." + "0" * n + "1x"',
    "exponent_digit_run": '"1e" + "9" * n + "x"',
    "sign_run": '"+" * n + "1"',
    "dot_run": '"." * n',
    "near_miss_tokens": '" ".join(["0.5000000001"] * (n // 13))',
    "long_mantissa": '"0." + "4" * n + "9"',
}
# stdout families on the exact a+b probe (expected "7" / "30")
_STDIO_OUTPUTS = {
    "tiny_lines": '"\\n" * n + "0"',
    "blank_space_lines": '" \\n" * (n // 2) + "0"',
    "one_long_line": '"7 " * (n // 2)',
    "cr_runs": '"\\r" * n + "0"',
    "unicode_spaces": '"\\x0b\\x0c\\x1c\\u2028" * (n // 4) + "0"',
}
# return values on the call probe (expected 7, 30, 2): Python expressions of the size n
_VALUES = {
    "wide_tuple": "(0,) * (n // 3)",
    "deep_lists": "[eval('[' * 90 + '1' + ']' * 90)] * (n // 182)",
    "empty_sets": "[set()] * (n // 7)",
    "empty_lists": "[[]] * (n // 4)",
    "long_ints": "[10 ** 4299] * (n // 4302)",
    "escaped_strings": "['\\n\\x00\\u1234'] * (n // 20)",
    "dict_of_ints": "{i: i for i in range(n // 12)}",
}


def _print(expr: str, n: int) -> str:
    return f"import sys\nn = {n}\nsys.stdout.write({expr})\n"


def _value(expr: str, n: int) -> str:
    return f"n = {n}\nsys_value = {expr}\n\ndef add(a, b):\n    return sys_value\n"


def _programs() -> list[Hostile]:
    out = []
    for name, expr in _FLOAT_OUTPUTS.items():
        for n in SIZES[:2]:
            out.append(hostile(f"float_{name}_{n >> 10}k", H, "stdio_float", _print(expr, n),
                               f"{n >> 10} KiB: {name} against a float-tolerance expectation"))
    for name, expr in _STDIO_OUTPUTS.items():
        for n in SIZES:
            out.append(hostile(f"stdio_{name}_{n >> 10}k", H, "stdio", _print(expr, n),
                               f"{n >> 10} KiB: {name} against an exact expectation"))
    for name, expr in _VALUES.items():
        for n in SIZES:
            out.append(hostile(f"value_{name}_{n >> 10}k", H, "call", _value(expr, n),
                               f"a {n >> 10} KiB literal: {name} returned for a scalar"))
    return out


PROGRAMS = _programs()
