"""The seccomp filter bubblewrap installs (`--seccomp FD`) before it runs a command: no unix
sockets, so a socket file that a host process listens on (in the project, or anywhere the
sandbox can see) cannot be connected from the sandbox; no keyrings, which are not namespaced;
and a few more calls that reach past the namespaces or open kernel attack surface (below).

Why seccomp and not Landlock: the network namespace already separates TCP and abstract unix
sockets; what reaches the host is a *pathname* unix socket, and connecting one needs only
the path. Landlock can scope abstract sockets (ABI 6, Linux 6.12) but has no access right for
connecting pathname sockets up to ABI 7 (what Linux 6.18 on our CI machines offers), older
kernels have no Landlock at all, and bubblewrap cannot apply it; a seccomp filter works on every
kernel bubblewrap runs on, and bubblewrap loads it itself.

What it refuses, with EPERM (Python raises PermissionError):
- `socket(AF_UNIX, ...)`: every new pathname or abstract unix socket.
- `socketpair(AF_UNIX, type)` unless `type` is SOCK_STREAM or SOCK_SEQPACKET. A connected
  stream or seqpacket pair cannot be pointed anywhere else (connect() and sendto() with an
  address fail with EISCONN), and asyncio's self-pipe, multiprocessing's Pipe() and
  subprocess use exactly those, so pytest keeps working. A datagram pair could send to any
  socket path with sendto(), so it is refused.
- `socket(AF_VSOCK, ...)`: virtio sockets reach the hypervisor and other VMs, and the network
  namespace does not separate them. `socket(AF_ALG, ...)`: the kernel's crypto API, attack
  surface no test needs. Docker's default profile refuses both families too.
- The keyring calls `add_key`, `keyctl`, `request_key`: keyrings are not namespaced, so the
  caller's session keyring (and the user's keyrings, with whatever tokens they hold) would be
  readable and writable from inside (Docker refuses them for that reason).
- Calls that need no capability but open kernel attack surface no command needs, each refused
  by Docker's default profile: `bpf` (unprivileged socket filters where
  kernel.unprivileged_bpf_disabled is 0), `perf_event_open` (perf_event_paranoid <= 2 lets a
  process profile itself), `userfaultfd` (a classic tool for winning kernel races, still
  open for user-mode faults where vm.unprivileged_userfaultfd is 0), `syslog` (reads the
  kernel log where kernel.dmesg_restrict is 0).
- io_uring (`io_uring_setup`, `_enter`, `_register`), with ENOSYS: io_uring creates and
  connects sockets without the socket() system call, past this filter. Programs that probe for
  it fall back to plain system calls.
What else Docker refuses is refused here by the kernel already: mounts, namespaces, modules,
reboot, clocks, raw I/O and the like need capabilities the sandbox does not have
(confinement.py drops them all and forbids nested user namespaces), and ptrace and its kin
reach only the command's own processes (its own PID namespace).
Another ABI in the same process (i386 through `int 0x80` on x86_64, the x32 ABI, 32-bit ARM on
aarch64) has other system call numbers the filter does not check: such a call kills the process.

The filter is classic BPF written out below: libseccomp's own Python binding is not on PyPI
(distributions ship it, e.g. python3-seccomp, built with libseccomp's sources), `pyseccomp`
(0.1.2) is a small third-party ctypes wrapper that also needs libseccomp.so on the host, and
the program is some 30 instructions. On an architecture not listed in ARCHITECTURES there is no
filter: the sandbox refuses to start (fail closed) and says so.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

# Classic BPF opcodes (linux/bpf_common.h) and seccomp return values (linux/seccomp.h).
LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS: A = 32-bit word at offset k
JEQ = 0x05 | 0x10  # BPF_JMP | BPF_JEQ | BPF_K: jump jt if A == k else jf
JGE = 0x05 | 0x30  # BPF_JMP | BPF_JGE | BPF_K: jump jt if A >= k else jf
AND = 0x04 | 0x50  # BPF_ALU | BPF_AND | BPF_K: A &= k
RET = 0x06  # BPF_RET | BPF_K: return k
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000  # | errno, returned by the system call
RET_KILL_PROCESS = 0x80000000

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]. Both
# architectures below are little-endian, so an argument's low 32 bits (all of an int
# argument: the kernel ignores the upper half) are at its own offset.
NR, ARCH = 0, 4


def _arg(index: int) -> int:
    return 16 + 8 * index


AF_UNIX, AF_ALG, AF_VSOCK = 1, 38, 40
REFUSED_FAMILIES = (AF_UNIX, AF_ALG, AF_VSOCK)
SOCK_STREAM, SOCK_SEQPACKET = 1, 5
SOCK_TYPE_MASK = 0xF  # the type without SOCK_NONBLOCK / SOCK_CLOEXEC
X32_SYSCALL_BIT = 0x40000000


@dataclass(frozen=True)
class Architecture:
    audit_arch: int
    """AUDIT_ARCH_* (linux/audit.h): the ABI of the system call being made."""
    socket: int
    socketpair: int
    io_uring: tuple[int, ...]
    refused: dict[str, int]
    """System calls refused with EPERM, by name (see the module's docstring for why)."""
    refuse_from: int | None
    """System call numbers at or above this belong to another ABI on the same arch value."""


ARCHITECTURES = {
    "x86_64": Architecture(
        audit_arch=0xC000003E, socket=41, socketpair=53, io_uring=(425, 426, 427),
        refused={
            "syslog": 103, "add_key": 248, "request_key": 249, "keyctl": 250,
            "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
        },
        refuse_from=X32_SYSCALL_BIT,
    ),
    "aarch64": Architecture(
        audit_arch=0xC00000B7, socket=198, socketpair=199, io_uring=(425, 426, 427),
        refused={  # the generic table (asm-generic/unistd.h)
            "syslog": 116, "add_key": 217, "request_key": 218, "keyctl": 219,
            "perf_event_open": 241, "bpf": 280, "userfaultfd": 282,
        },
        refuse_from=None,
    ),
}  # fmt: skip
ARCHITECTURES["amd64"] = ARCHITECTURES["x86_64"]
ARCHITECTURES["arm64"] = ARCHITECTURES["aarch64"]


class UnsupportedArchitecture(RuntimeError):
    """No filter for this machine: the sandbox must not start without one."""


def architecture(machine: str | None = None) -> Architecture:
    name = (machine or platform.machine()).lower()
    try:
        return ARCHITECTURES[name]
    except KeyError:
        supported = ", ".join(sorted(ARCHITECTURES))
        raise UnsupportedArchitecture(
            f"no seccomp filter for the {name or 'unknown'} architecture (only {supported}): "
            "the sandbox would let commands connect to unix sockets on the host"
        ) from None


Jump = int | str
"""A jump: a label, or 0 for the next instruction."""


def program(arch: Architecture) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions."""
    allow, deny = (RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_ERRNO | errno.EPERM)
    kill = (RET, 0, 0, RET_KILL_PROCESS)
    source: list[tuple[int, Jump, Jump, int] | str] = [
        (LD_W_ABS, 0, 0, ARCH),  # A = the ABI of this call
        (JEQ, "native", 0, arch.audit_arch),
        kill,  # another ABI (i386 int 0x80, 32-bit ARM): numbers this filter does not check
        "native",
        (LD_W_ABS, 0, 0, NR),  # A = the system call number
    ]
    if arch.refuse_from is not None:
        # x32 calls carry the native arch value, with bit 30 set in the number
        source += [(JGE, 0, "x32_done", arch.refuse_from), kill, "x32_done"]
    source += [(JEQ, "enosys", 0, number) for number in arch.io_uring]
    source += [(JEQ, "deny", 0, number) for number in arch.refused.values()]
    source += [
        (JEQ, "socket", 0, arch.socket),
        (JEQ, "socketpair", 0, arch.socketpair),
        allow,  # every other call
        "socket",  # socket(domain, type, protocol)
        (LD_W_ABS, 0, 0, _arg(0)),  # A = domain
        *((JEQ, "deny", 0, family) for family in REFUSED_FAMILIES),
        allow,
        "socketpair",  # socketpair(domain, type, protocol, sv)
        (LD_W_ABS, 0, 0, _arg(0)),  # A = domain
        (JEQ, 0, "allow", AF_UNIX),  # not unix: the kernel decides (no other family pairs)
        (LD_W_ABS, 0, 0, _arg(1)),  # A = type
        (AND, 0, 0, SOCK_TYPE_MASK),  # without SOCK_NONBLOCK / SOCK_CLOEXEC
        (JEQ, "allow", 0, SOCK_STREAM),
        (JEQ, "allow", "deny", SOCK_SEQPACKET),
        "allow",
        allow,
        "deny",
        deny,
        "enosys",
        (RET, 0, 0, RET_ERRNO | errno.ENOSYS),
    ]
    return _assemble(source)


def _assemble(
    source: list[tuple[int, Jump, Jump, int] | str],
) -> list[tuple[int, int, int, int]]:
    """Resolve labels into what a BPF jump holds: how many instructions it skips."""
    labels: dict[str, int] = {}
    position = 0
    for item in source:
        if isinstance(item, str):
            labels[item] = position
        else:
            position += 1
    code: list[tuple[int, int, int, int]] = []
    for item in source:
        if not isinstance(item, str):
            op, jt, jf, k = item
            after = len(code) + 1  # a jump counts from the next instruction
            code.append((op, _skip(jt, labels, after), _skip(jf, labels, after), k))
    return code


def _skip(jump: Jump, labels: dict[str, int], after: int) -> int:
    skip = labels[jump] - after if isinstance(jump, str) else jump
    if not 0 <= skip <= 255:  # classic BPF jumps only forward, by at most 255
        raise ValueError(f"seccomp filter: jump to {jump!r} out of range")
    return skip


def filter_bytes(machine: str | None = None) -> bytes:
    """struct sock_filter[] in the host's byte order, as bwrap's --seccomp reads it."""
    return b"".join(
        struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program(architecture(machine))
    )
