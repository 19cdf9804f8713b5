"""Where a process group's CPU goes, from ``perf`` call chains: user code, fork, exit, page faults, other syscalls.

The cost bench (:mod:`bench_judge`) and the sandbox profile (:mod:`profile_sandbox`) give CPU per test; this splits
it by what the kernel was doing, so the judge's sandbox and the floor (:mod:`floor`) can be compared category by
category. Input: the output of ``perf script -F comm,tid,ip,sym`` of a ``perf record -a -g`` run; only samples of
processes named ``COMM`` count (``python3``: the sandbox's and the floor's interpreter, ``/usr/bin/python3``). Each
sample goes to the first category its call chain (leaf first) shows:

* ``fork``: inside ``clone``/``clone3`` (mostly ``copy_page_range``: the parent's page-table entries copied);
* ``exit``: inside ``exit_group``/``do_exit`` (mostly ``exit_mmap``: every mapped page unmapped);
* ``page fault: copy-on-write`` (``do_wp_page``), ``page fault: file`` (text and data of the interpreter faulted
  back in after a ``fork``), ``page fault: other`` (fault entry, VMA lookup, zero-filled anonymous pages);
* ``syscall other``: any other system call; ``user``: no kernel entry in the chain; ``kernel other``: the rest.

Run as root from the repository root, e.g. for the sandbox profile and the floor::

    perf record -a -g -F 2999 -o /tmp/sb.data -- python bench/judge/profile_sandbox.py --programs 200
    perf script -i /tmp/sb.data -F comm,tid,ip,sym > /tmp/sb.txt
    python bench/judge/kernel_split.py /tmp/sb.txt python3

Prints one JSON object: ``samples`` (of ``COMM``; at ``-F`` samples per second of CPU) and ``share`` (per category,
percent of those samples).
"""

from __future__ import annotations

import collections
import json
import re
import sys
from collections.abc import Iterator

_SYSCALL = re.compile(r"__(?:x64|do)_sys_(\w+)")


def samples(lines: Iterator[str], comm: str) -> Iterator[list[str]]:
    """The call chains (symbols, leaf first) of the samples of processes named ``comm`` in ``perf script`` text."""
    chain: list[str] | None = None
    for line in lines:
        if not line.startswith((" ", "\t")):
            if chain is not None:
                yield chain
            head = line.split()
            chain = [] if head and head[0] == comm else None
        elif chain is not None:
            parts = line.split(None, 1)
            if len(parts) == 2:
                chain.append(parts[1].strip())
    if chain is not None:
        yield chain


def category(chain: list[str]) -> str:
    """The category of one sample's call chain (module docstring)."""
    for sym in chain:
        m = _SYSCALL.match(sym)
        if m:
            name = m.group(1)
            if name in ("clone", "clone3"):
                return "fork"
            return "exit" if name in ("exit_group", "exit") else "syscall other"
        if sym.startswith("asm_exc_page_fault"):
            if any(x.startswith(("do_wp_page", "wp_page_copy")) for x in chain):
                return "page fault: copy-on-write"
            if any(x.startswith(("filemap_map_pages", "do_read_fault", "do_fault")) for x in chain):
                return "page fault: file"
            return "page fault: other"
        if sym.startswith("do_exit"):
            return "exit"
    if any(x.startswith(("entry_SYSCALL", "asm_", "irq", "sysvec")) for x in chain):
        return "kernel other"
    return "user"


def split(path: str, comm: str) -> dict[str, object]:
    """``{"comm", "samples", "share": {category: percent}}`` of ``perf script`` output file ``path``."""
    counts: collections.Counter[str] = collections.Counter()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for chain in samples(fh, comm):
            counts[category(chain)] += 1
    total = sum(counts.values())
    return {"comm": comm, "samples": total,
            "share": {k: round(100 * v / total, 1) for k, v in counts.most_common()} if total else {}}


if __name__ == "__main__":
    print(json.dumps(split(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "python3")))
