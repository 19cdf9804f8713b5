"""The lean warm-interpreter fork floor of the judge bench (no isolation, standard library only).

Run by :mod:`bench_judge` under the same interpreter the sandbox uses (``/usr/bin/python3 -I``): reads one JSON
request ``{"items": [{"code", "tests": [{"stdin", "stdout"}]}]}`` on stdin, then for every test forks this already
warm process; the child points fds 0/1 at pipes and ``exec``\\s the pre-compiled program; the parent writes the
input, reads the output, waits for the child and compares whitespace-separated tokens. Prints
``{"tests", "accepted", "cpu_s", "parent_cpu_s", "child_cpu_s", "parent_faults", "child_faults"}`` (``cpu_s``: this
process and every reaped child, RUSAGE_SELF + RUSAGE_CHILDREN; faults: minor page faults, the same split; compare
with ``profile_sandbox.py``).
"""

import json
import os
import resource
import sys


def run_one(code_obj, stdin):
    """Fork, run ``code_obj`` with ``stdin`` text in and stdout to a pipe; return (exit status, stdout bytes)."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        for fd in (in_r, in_w, out_r, out_w):
            os.close(fd)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        code = 0
        try:
            exec(code_obj, {"__name__": "__main__"})
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
        except BaseException:
            code = 1
        sys.stdout.flush()
        os._exit(code)
    os.close(in_r)
    os.close(out_w)
    data = stdin.encode()
    while data:  # inputs of the workload fit a pipe buffer; write all, then read
        data = data[os.write(in_w, data):]
    os.close(in_w)
    chunks = []
    while True:
        b = os.read(out_r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(out_r)
    _, status = os.waitpid(pid, 0)
    return status, b"".join(chunks)


def main():
    req = json.loads(sys.stdin.read())
    n = ok = 0
    for item in req["items"]:
        code_obj = compile(item["code"], "<solution>", "exec")
        for t in item["tests"]:
            status, out = run_one(code_obj, t["stdin"])
            n += 1
            ok += status == 0 and out.split() == t["stdout"].encode().split()
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    parent, children = me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
    sys.stdout.write(json.dumps({"tests": n, "accepted": ok, "cpu_s": parent + children, "parent_cpu_s": parent,
                                 "child_cpu_s": children, "parent_faults": me.ru_minflt,
                                 "child_faults": kids.ru_minflt}) + "\n")


if __name__ == "__main__":
    main()
