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

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K


def _ins(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def program():
    """The filter as bytes (an array of ``struct sock_filter``) and its instruction count."""
    x86 = sorted({v[0] for v in DENIED.values()})
    arm = sorted({v[1] for v in DENIED.values()})

    def block(nrs, x32):
        # nr loaded; ``len(nrs)`` compares then ALLOW, with DENY placed right after: each jeq jumps to it on match
        out = [_ins(_LD_W_ABS, 0, 0, 0)]
        n = len(nrs)
        if x32:
            out.append(_ins(_JGE_K, n + 1, 0, 0x40000000))  # to DENY
        for i, nr in enumerate(nrs):
            out.append(_ins(_JEQ_K, n - i, 0, nr))  # match: skip the rest and ALLOW, land on DENY
        out.append(_ins(_RET_K, 0, 0, RET_ALLOW))
        out.append(_ins(_RET_K, 0, 0, RET_EPERM))
        return out

    bx, ba = block(x86, True), block(arm, False)
    head = [_ins(_LD_W_ABS, 0, 0, 4)]
    # arch == x86_64 -> bx; arch == aarch64 -> ba; else EPERM
    head.append(_ins(_JEQ_K, 2, 0, AUDIT_ARCH_X86_64))
    head.append(_ins(_JEQ_K, 1 + len(bx), 0, AUDIT_ARCH_AARCH64))
    head.append(_ins(_RET_K, 0, 0, RET_EPERM))
    prog = head + bx + ba
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
