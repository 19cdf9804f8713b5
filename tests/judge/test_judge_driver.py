"""Assert tests through the driver sandbox: objects of trusted classes, remote instances, stdlib modules, exceptions
and timeouts crossing the boundary; asserts of the ``f(x) == literal`` shape run as host-compared calls."""

from __future__ import annotations

from rlvr.data.schema import Problem
from rlvr.judge.asserts import as_call, driver_request

PREFIX = '''
class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next

def list_node(values):
    head = None
    for v in reversed(values):
        head = ListNode(v, head)
    return head

def is_same_list(a, b):
    while a and b:
        if a.val != b.val:
            return False
        a, b = a.next, b.next
    return a is None and b is None
'''

REVERSE = '''
class Solution:
    def reverseList(self, head):
        prev = None
        while head:
            head.next, prev, head = prev, head, head.next
        return prev
'''


def leet(tests):
    return Problem(id="t/leet", source="t", split="test", statement="", solution_prefix=PREFIX,
                   entry_point="Solution().reverseList", tests=tests)


def test_trusted_class_instances_cross_both_ways(judge):
    same = "assert is_same_list(candidate(head=list_node([1, 2, 3])), list_node([3, 2, 1]))"
    p = leet([{"kind": "assert", "code": same}, {"kind": "assert", "code": "assert candidate(head=None) is None"}])
    assert judge.judge(p, REVERSE).verdict == "accepted"
    wrong = REVERSE.replace("return prev", "return head")
    assert judge.judge(p, wrong).passed == 1


def test_instances_of_submission_classes_stay_remote(judge):
    code = "my = Solution()\nassert my.reverseList(list_node([1])).val == 1\nassert my.scale(3) == 6\n"
    p = leet([{"kind": "assert", "code": code}])
    good = REVERSE + "    def scale(self, x):\n        return 2 * x\n"
    assert judge.judge(p, good).verdict == "accepted"
    assert judge.judge(p, REVERSE + "    def scale(self, x):\n        return x\n").verdict == "wrong_answer"


def test_exceptions_and_timeouts_of_the_candidate(judge):
    p = Problem(id="t/e", source="t", split="test", statement="", entry_point="f", time_limit_s=1.0, tests=[
        {"kind": "assert",
         "code": "try:\n    f(-1)\n    raise AssertionError('no error')\nexcept ValueError:\n    pass\n"},
        {"kind": "assert", "code": "assert f(1) + 0 == 1"},
        {"kind": "assert", "code": "assert f(10 ** 9) + 0 == 0"},
    ])
    code = "def f(x):\n    if x < 0:\n        raise ValueError('neg')\n    while x > 100:\n        pass\n    return x\n"
    res = judge.judge(p, code)
    assert [t.verdict for t in res.tests] == ["accepted", "accepted", "timeout"]


def test_stdlib_modules_the_test_reads_are_the_drivers_own(judge):
    p = Problem(id="t/s", source="t", split="test", statement="", entry_point="f",
                tests=[{"kind": "assert", "code": "assert math.isclose(f(2) + 0.0, math.sqrt(2))"}])
    assert judge.judge(p, "import math\ndef f(x):\n    return math.sqrt(x)\n").verdict == "accepted"
    forged = "import math\nmath.isclose = lambda *a, **k: True\nmath.sqrt = lambda x: 0\ndef f(x):\n    return 0\n"
    assert judge.judge(p, forged).verdict == "wrong_answer"


def test_assert_shapes_converted_to_calls():
    conv = as_call("assert f(1, 'a', [2]) == (3, 4)", "f")
    assert conv is not None and (conv.args, conv.kwargs, conv.expected) == ("[1, 'a', [2]]", "{}", "(3, 4)")
    conv = as_call("assert candidate(nums=[1], k=2) == 5", "Solution().f")
    assert conv is not None and conv.kwargs == "{'nums': [1], 'k': 2}" and conv.args == "[]"
    assert as_call("assert 7 == f(0)", "f").expected == "7"
    for code in ("assert set(f(1)) == {1}", "assert f(x) == 1", "assert f(1) == g(2)", "assert f(1) != 2",
                 "assert f(1) == 2, 'msg'", "x = 1\nassert f(1) == 2"):
        assert as_call(code, "f") is None, code


def test_driver_request_proxies_only_what_trusted_code_lacks():
    p = Problem(id="t/d", source="t", split="test", statement="", entry_point="f", starter_code="def helper(x):\n",
                test_setup="import math", tests=[{"kind": "assert", "code": "assert g(f(1)) == math.pi"}])
    req = driver_request(p, ["assert g(f(1)) == math.pi"], 3)
    # the entry point is bound by the driver itself; ``math`` is listed but the driver keeps its trusted import
    assert req["remote_names"] == ["g", "math"]
    assert req["prelude"][-1] == {"code": "import math", "optional": True}
