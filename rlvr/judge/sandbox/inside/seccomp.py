"""A small seccomp filter for the sandbox, built in pure Python (standard library only; runs inside the sandbox).

Classic BPF over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at 4; seccomp(2), ``linux/seccomp.h``,
``linux/filter.h``). The program checks the architecture (x86_64 or aarch64; any other ``arch`` value — e.g. 32-bit
``int 0x80`` calls from an x86_64 process — is refused), refuses x32 syscall numbers (``nr >= 0x40000000``) and makes
the syscalls in :data:`DENIED` fail with ``EPERM``; everything else is allowed. Loaded with
``prctl(PR_SET_NO_NEW_PRIVS, 1)`` then ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)``: the filter binds the
calling process and every process it forks or execs afterwards, for good.

Denied (why): ``ptrace``, ``process_vm_readv``/``process_vm_writev``, ``kcmp``, ``pidfd_getfd``,
``process_madvise`` (reading, writing or inspecting another process of the same uid); ``keyctl``/``add_key``/
``request_key`` (kernel keyrings outlive processes: state across submissions); ``userfaultfd``, ``bpf``,
``perf_event_open``, ``io_uring_*`` (large kernel attack surface, unneeded by programs).

Allowed on the calling process only (:data:`SELF_ONLY`; issue 43): ``prlimit64``, ``setpriority``,
``sched_setparam``/``sched_setscheduler``/``sched_setattr``/``sched_setaffinity``, ``ioprio_set``,
``migrate_pages``/``move_pages``. Every process of a sandbox has the same uid, so without these checks any process of a
submission could lower the rlimits, priority, scheduling policy, CPU affinity or I/O priority of the warden (PID 1) or
its zygote, which every later runner inherits: state that outlives the submission. Each is allowed only when its
target is the caller itself: pid argument 0 (``setpriority``/``ioprio_set``: ``PRIO_PROCESS``/``IOPRIO_WHO_PROCESS``
with who 0, never a process group or a user); ``prlimit64`` on another pid also when it only reads (``new_limit`` is
NULL: the warden reads its zygote's limits that way). The pid arguments are C ``int``s, which the kernel truncates
from the 64-bit register, so the low 32 bits of ``seccomp_data.args[i]`` are exactly what the kernel uses
(little-endian: both architectures here). ``getpid()``'s own number is refused like any other (the filter cannot know
it): ``os.sched_setaffinity(0, …)``, ``os.nice``, ``resource.setrlimit`` all pass 0.
"""

import ctypes
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
RET_ALLOW = 0x7FFF0000
RET_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM

DENIED = {  # name: (x86_64 number, aarch64 number); arch/x86/entry/syscalls/syscall_64.tbl, asm-generic/unistd.h
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kcmp": (312, 272),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "userfaultfd": (323, 282),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
}

# name: (x86_64 number, aarch64 number, allowed-when): allowed when one alternative holds, each a tuple of
# (``seccomp_data`` offset, value) equalities on 32-bit words: args[i] is at 16 + 8 * i, its high word 4 further on
_ARG = 16
SELF_ONLY = {
    "prlimit64": (302, 261, (((_ARG, 0),), ((_ARG + 16, 0), (_ARG + 20, 0)))),  # pid 0, or new_limit NULL (a read)
    "setpriority": (141, 140, (((_ARG, 0), (_ARG + 8, 0)),)),  # which PRIO_PROCESS, who 0
    "sched_setparam": (142, 118, (((_ARG, 0),),)),
    "sched_setscheduler": (144, 119, (((_ARG, 0),),)),
    "sched_setaffinity": (203, 122, (((_ARG, 0),),)),
    "sched_setattr": (314, 274, (((_ARG, 0),),)),
    "ioprio_set": (251, 30, (((_ARG, 1), (_ARG + 8, 0)),)),  # which IOPRIO_WHO_PROCESS, who 0
    "migrate_pages": (256, 238, (((_ARG, 0),),)),
    "move_pages": (279, 239, (((_ARG, 0),),)),
}

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K


def _assemble(code):
    """Bytes of ``code``: ``(op, jt, jf, k)`` tuples and label strings; a ``jt``/``jf`` that is a string jumps to that
    label (classic BPF jumps are relative, forward only, at most 255 instructions)."""
    where, n = {}, 0
    for ins in code:
        if isinstance(ins, str):
            where[ins] = n
        else:
            n += 1
    out, i = [], 0
    for ins in code:
        if isinstance(ins, str):
            continue
        op, jt, jf, k = ins
        jt, jf = (where[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise ValueError("seccomp program: jump out of range")
        out.append(struct.pack("HBBI", op, jt, jf, k))
        i += 1
    return out


def _arch_block(tag, col, x32):
    """The code for one architecture (``col``: 0 for x86_64 numbers, 1 for aarch64): the denied numbers and the
    dispatch to the self-only checks, ALLOW for anything else, the checks, then the shared EPERM (every jump goes
    forward); labels carry ``tag``."""
    deny = f"{tag}deny"
    out = [(_LD_W_ABS, 0, 0, 0)]
    if x32:
        out.append((_JGE_K, deny, 0, 0x40000000))
    for nr in sorted({v[col] for v in DENIED.values()}):
        out.append((_JEQ_K, deny, 0, nr))
    rules = sorted(SELF_ONLY.items(), key=lambda kv: kv[1][col])
    for name, spec in rules:
        out.append((_JEQ_K, f"{tag}{name}", 0, spec[col]))
    out.append((_RET_K, 0, 0, RET_ALLOW))  # any other syscall
    for name, spec in rules:
        out.append(f"{tag}{name}")
        alts = spec[2]
        for a, alt in enumerate(alts):
            nxt = f"{tag}{name}.{a + 1}" if a + 1 < len(alts) else deny
            for off, val in alt:
                out += [(_LD_W_ABS, 0, 0, off), (_JEQ_K, 0, nxt, val)]
            out.append((_RET_K, 0, 0, RET_ALLOW))
            if a + 1 < len(alts):
                out.append(nxt)
    return [*out, deny, (_RET_K, 0, 0, RET_EPERM)]


def program():
    """The filter as bytes (an array of ``struct sock_filter``) and its instruction count."""
    # arch == x86_64 -> its block; arch == aarch64 -> its block; else EPERM
    code = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, "x86", 0, AUDIT_ARCH_X86_64), (_JEQ_K, "arm", 0, AUDIT_ARCH_AARCH64),
            (_RET_K, 0, 0, RET_EPERM), "x86", *_arch_block("x86.", 0, True), "arm", *_arch_block("arm.", 1, False)]
    prog = _assemble(code)
    return b"".join(prog), len(prog)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install():
    """Load the filter on this process (and all its future children). Returns True on success, False where the
    kernel refuses it (no seccomp support); never raises."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        code, n = program()
        buf = ctypes.create_string_buffer(code, len(code))
        prog = _Fprog(n, ctypes.cast(buf, ctypes.c_void_p))
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return False
        return libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    except (OSError, AttributeError):
        return False
