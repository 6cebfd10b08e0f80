"""Per-command bounds of the OS sandbox, with real bubblewrap, real processes and real files:
the caller's keyrings and the other calls Docker's default seccomp profile refuses are out of
reach, memory is bounded for the whole command (not per process), and the command's folder
has a total size."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from remora.config.settings import CommandSettings
from remora.sandbox import seccomp
from remora.sandbox.commands import CommandRunner, SandboxFailed
from remora.sandbox.folder import left_file

MIB = 1024 * 1024


def run_python(tmp_path: Path, code: str, **settings: Any) -> dict[str, Any]:
    """`code` as a script in a fresh command folder, run with Remora's Python in the sandbox;
    the result, and the folder's files afterwards under "left" (what came back to the host)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "probe.py").write_text(textwrap.dedent(code))
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    runner = CommandRunner(CommandSettings(allowed=["python3"], **settings))
    result = anyio.run(lambda: runner.run("python3", ["probe.py"], workspace, project=project))
    result["left"] = {
        str(path.relative_to(workspace)): path.lstat().st_size
        for path in workspace.rglob("*")
        if path.is_file() and not path.is_symlink()
    }
    return result


KEYRING_PROBE = """\
    import ctypes, errno, json, os, socket
    libc = ctypes.CDLL(None, use_errno=True)
    NR = {
        "x86_64": {"keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
                   "perf_event_open": 298, "userfaultfd": 323, "syslog": 103},
        "aarch64": {"keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280,
                    "perf_event_open": 241, "userfaultfd": 282, "syslog": 116},
    }[os.uname().machine]
    KEYCTL_GET_KEYRING_ID, KEYCTL_READ, KEY_SPEC_SESSION_KEYRING = 0, 11, -3

    def call(name, *args):
        ctypes.set_errno(0)
        value = libc.syscall(ctypes.c_long(NR[name]), *args)
        return value if value >= 0 else errno.errorcode[ctypes.get_errno()]

    def sock(family, kind):
        try:
            socket.socket(family, kind).close()
            return "created"
        except OSError as exc:
            return errno.errorcode[exc.errno]

    buffer = ctypes.create_string_buffer(4096)
    attr = bytearray(128)  # struct perf_event_attr: a software clock of this process only
    attr[0:4] = (1).to_bytes(4, "little")  # type: PERF_TYPE_SOFTWARE (config 0: cpu clock)
    attr[4:8] = (128).to_bytes(4, "little")  # size
    attr[40:48] = (0b1100000).to_bytes(8, "little")  # exclude_kernel, exclude_hv
    seen = {
        # what an attacker wants: the id of the caller's session keyring, then its keys
        "session_keyring": call("keyctl", KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0),
        "read": call("keyctl", KEYCTL_READ, KEY_SPEC_SESSION_KEYRING, buffer, 4096),
        "add_key": call("add_key", b"user", b"remora", b"x", 1, 0),  # keyring 0: no such
        "request_key": call("request_key", b"user", b"remora", None, 0),
        "userfaultfd": call("userfaultfd", os.O_CLOEXEC | 1),  # UFFD_USER_MODE_ONLY
        "perf_event_open": call("perf_event_open", ctypes.c_char_p(bytes(attr)), 0, -1, -1, 0),
        "bpf": call("bpf", 0, None, 0),
        "syslog": call("syslog", 10, None, 0),  # SYSLOG_ACTION_SIZE_BUFFER
        "vsock": sock(40, socket.SOCK_STREAM),
        "alg": sock(38, socket.SOCK_SEQPACKET),
    }
    print(json.dumps(seen))
"""


def test_the_callers_keyrings_are_out_of_reach(tmp_path: Path) -> None:
    """Keyrings are not namespaced: without the filter the sandbox reads the session keyring
    of the process that started Remora (measured before the change: its id and its list of
    keys). The filter refuses every keyring call, and the other calls Docker refuses that need
    no capability, with EPERM."""
    result = run_python(tmp_path, KEYRING_PROBE)
    assert result["exit_code"] == 0, result["stderr"]
    seen = json.loads(result["stdout"])
    assert seen == dict.fromkeys(seen, "EPERM"), seen


def test_every_architecture_refuses_the_same_calls() -> None:
    """The numbers differ per architecture (x86_64's own table, aarch64's generic one); the
    calls refused must not."""
    refused = {"add_key", "keyctl", "request_key", "bpf", "perf_event_open", "userfaultfd"}
    for machine in ("x86_64", "aarch64"):
        arch = seccomp.architecture(machine)
        assert set(arch.refused) == refused | {"syslog"}, machine
        assert len(set(arch.refused.values())) == len(arch.refused), machine
        assert seccomp.filter_bytes(machine)  # assembles: every jump within reach


MEMORY_HOG = """\
    import json, os, time
    children = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            held = b"x" * (1 << 30)  # 1 GiB, every page written
            time.sleep(3)
            os._exit(0)
        children.append(pid)
    statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    print(json.dumps(statuses))
"""


def test_memory_is_bounded_for_the_whole_command(tmp_path: Path) -> None:
    """memory_mb bounds the command, not each process: three processes that each hold 1 GiB
    (each under the 2 GiB address-space limit) do not all fit in 2 GiB. Before the change all
    three held their 1 GiB at once."""
    runner = CommandRunner(CommandSettings(allowed=["python3"], memory_mb=2048))
    assert runner.confinement is not None
    if not runner.confinement.memory_limit_enforced:
        pytest.skip("no writable memory cgroup here: memory_mb bounds each process only")
    result = run_python(tmp_path, MEMORY_HOG, memory_mb=2048, timeout_s=30)
    assert result["exit_code"] == 0, result["stderr"]
    statuses = json.loads(result["stdout"])
    assert -9 in statuses, statuses  # the kernel's OOM killer ended one (SIGKILL)
    assert statuses.count(0) <= 1, statuses  # at most one other child fit beside it


FOLDER_FILLER = """\
    import errno, json, os
    written, why = 0, None
    try:
        for index in range(5):  # 5 x 200 MiB: each file under the 256 MiB per-file limit
            with open(f"fill{index}", "wb") as file:
                for _ in range(200):
                    file.write(b"x" * (1 << 20))
                    file.flush()
                    written += 1
    except OSError as exc:
        why = errno.errorcode[exc.errno]
    print(json.dumps([written, why]))
"""


def test_the_command_folder_has_a_total_size(tmp_path: Path) -> None:
    """1 GiB written in 200 MiB files (the per-file limit is 256 MiB) stops at the folder's
    size (sandbox.commands.folder_mb, 256 MiB by default) with ENOSPC; the host gets back at
    most that much. Before the change all 1,000 MiB reached the host's disk."""
    result = run_python(tmp_path, FOLDER_FILLER)
    assert result["exit_code"] == 0, result["stderr"]
    written, why = json.loads(result["stdout"])
    folder_mb = CommandSettings().folder_mb
    assert why == "ENOSPC", (written, why)
    assert folder_mb - 8 <= written <= folder_mb, written
    assert sum(result["left"].values()) <= folder_mb * MIB, result["left"]


def test_what_a_command_leaves_in_its_folder_comes_back(tmp_path: Path) -> None:
    """The folder is a tmpfs inside the sandbox; what the command leaves there is copied back
    to the host directory afterwards (pytest's reports, the call probe's result): new files
    and folders, changed and removed files, links and modes, and nothing through a link."""
    workspace = tmp_path / "ws"
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "mod.py").write_text("x = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace.mkdir()
    (workspace / "pkg").symlink_to(project / "pkg")  # as the workspace links into the project
    (workspace / "mine.txt").write_text("the job's copy\n")
    (workspace / "gone.txt").write_text("removed by the command\n")
    code = f"""\
        import os
        os.makedirs("reports/deep")
        open("reports/deep/junit.xml", "w").write("<testsuite/>")
        open("mine.txt", "a").write("and the command's line\\n")
        os.remove("gone.txt")
        os.symlink({str(outside)!r}, "escape")
        os.chmod("reports/deep/junit.xml", 0o640)
        try:
            open("pkg/new.py", "w").write("no")  # through the link: the project is read-only
        except OSError as exc:
            print(type(exc).__name__)
        print(open("pkg/mod.py").read(), end="")
    """
    (workspace / "probe.py").write_text(textwrap.dedent(code))
    runner = CommandRunner(CommandSettings(allowed=["python3"]))
    result = anyio.run(lambda: runner.run("python3", ["probe.py"], workspace, project=project))
    assert result["exit_code"] == 0, result["stderr"]
    assert result["stdout"] == "OSError\nx = 1\n"
    assert (workspace / "reports" / "deep" / "junit.xml").read_text() == "<testsuite/>"
    assert (workspace / "reports" / "deep" / "junit.xml").stat().st_mode & 0o777 == 0o640
    assert (workspace / "mine.txt").read_text() == "the job's copy\nand the command's line\n"
    assert not (workspace / "gone.txt").exists()
    assert os.readlink(workspace / "pkg") == str(project / "pkg")
    assert os.readlink(workspace / "escape") == str(outside)
    assert list(outside.iterdir()) == []
    assert sorted(path.name for path in (project / "pkg").iterdir()) == ["mod.py"]


FORGED_COPY_BACK = """\
    import io, os, stat, tarfile
    # The folder's shell (this process's parent) holds the copy-back channel: a pipe that is
    # not stdin, stdout or stderr. Whatever is written there is read as the folder's tar.
    shell = os.getppid()
    channel = next(
        int(fd) for fd in os.listdir(f"/proc/{shell}/fd")
        if int(fd) > 2 and os.readlink(f"/proc/{shell}/fd/{fd}").startswith("pipe:")
    )
    def entry(name, kind=tarfile.REGTYPE, data=b"", **fields):
        info = tarfile.TarInfo(name)
        info.type, info.size = kind, len(data)
        for key, value in fields.items():
            setattr(info, key, value)
        return info, io.BytesIO(data)
    with open(f"/proc/{shell}/fd/{channel}", "wb") as file:
        archive = tarfile.open(fileobj=file, mode="w|", format=tarfile.GNU_FORMAT)
        for info, data in [
            entry("ok.txt", data=b"forged, but inside\\n"),
            entry("escape", tarfile.SYMTYPE, linkname=OUTSIDE),
            entry("escape/pwned", data=b"through a link\\n"),
            entry("../pwned", data=b"above the folder\\n"),
            entry("/tmp/pwned-absolute", data=b"an absolute name\\n"),
            entry("passwd", tarfile.LNKTYPE, linkname="/etc/passwd"),
            entry("escape-link", tarfile.LNKTYPE, linkname="escape/x"),
            entry("fifo", tarfile.FIFOTYPE),
            entry("null", tarfile.CHRTYPE, devmajor=1, devminor=3),
            entry("deep/" * 60 + "name.txt", data=b"a long name\\n"),  # past ustar's 256
        ]:
            archive.addfile(info, data)
        archive.close()
"""


def test_a_forged_copy_back_writes_nothing_outside_the_folder(tmp_path: Path) -> None:
    """A process of the command can open the copy-back channel through /proc and write its own
    tar there: the host reads it like any other, and nothing lands outside the folder, goes
    through a link, or is a device or a FIFO."""
    outside = tmp_path / "outside"
    outside.mkdir()
    code = FORGED_COPY_BACK.replace("OUTSIDE", repr(str(outside)))
    result = run_python(tmp_path, code)
    assert result["exit_code"] == 0, result["stderr"]
    workspace = tmp_path / "ws"
    assert (workspace / "ok.txt").read_text() == "forged, but inside\n"
    assert os.readlink(workspace / "escape") == str(outside)
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "pwned").exists()
    assert not Path("/tmp/pwned-absolute").exists()
    assert (workspace / "tmp" / "pwned-absolute").read_text() == "an absolute name\n"
    assert (workspace / ("deep/" * 60 + "name.txt")).read_text() == "a long name\n"
    names = {path.name for path in workspace.iterdir()}
    assert names == {"ok.txt", "escape", "tmp", "deep"}, names


OVERSIZED_HEADER = """\
    import os, tarfile
    shell = os.getppid()
    channel = next(
        int(fd) for fd in os.listdir(f"/proc/{shell}/fd")
        if int(fd) > 2 and os.readlink(f"/proc/{shell}/fd/{fd}").startswith("pipe:")
    )
    with open(f"/proc/{shell}/fd/{channel}", "wb") as file:
        header = tarfile.TarInfo("././@LongLink")
        header.type, header.size = tarfile.GNUTYPE_LONGNAME, 2 * 1024 * 1024
        file.write(header.tobuf(format=tarfile.USTAR_FORMAT))
        file.write(b"x" * 1024)  # the header promises 2 MiB; tarfile would hold them in memory
"""


def test_an_oversized_header_in_the_copy_back_is_refused(tmp_path: Path) -> None:
    """tarfile keeps long-name and pax headers in memory: one over 1 MiB ends the copy back
    (the folder stays as it was), and the command's stderr says so."""
    result = run_python(tmp_path, OVERSIZED_HEADER)
    assert result["exit_code"] == 0, result["stderr"]
    assert "was not all copied back" in result["stderr"], result["stderr"]
    assert result["left"] == {"probe.py": len(textwrap.dedent(OVERSIZED_HEADER))}


def test_a_folder_too_small_for_the_jobs_files_is_the_sandboxs_failure(tmp_path: Path) -> None:
    """The job's files must all be in the folder before the command runs: where they do not fit
    in folder_mb the command does not run on part of them; it is an environment error."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "big.bin").write_bytes(b"x" * (2 * MIB))
    runner = CommandRunner(CommandSettings(allowed=["sh"], folder_mb=1))
    with pytest.raises(SandboxFailed, match="cannot fill the command's folder"):
        anyio.run(lambda: runner.run("sh", ["-c", "echo ran"], workspace, project=tmp_path))
    assert (workspace / "big.bin").stat().st_size == 2 * MIB  # the job's folder as it was


OVERSIZED_COPY_BACK = """\
    import os, tarfile
    shell = os.getppid()
    channel = next(
        int(fd) for fd in os.listdir(f"/proc/{shell}/fd")
        if int(fd) > 2 and os.readlink(f"/proc/{shell}/fd/{fd}").startswith("pipe:")
    )
    with open(f"/proc/{shell}/fd/{channel}", "wb") as file:
        header = tarfile.TarInfo("big.bin")
        header.size = 200 * 1024 * 1024
        file.write(header.tobuf(format=tarfile.GNU_FORMAT))
        try:
            for _ in range(200):
                file.write(b"x" * 1024 * 1024)
        except BrokenPipeError:
            print("the host stopped reading")
"""


def test_the_copy_back_is_bounded_too(tmp_path: Path) -> None:
    """The host reads at most folder_mb plus room for tar's headers (64 MiB) from the channel,
    whatever a process of the command writes there."""
    result = run_python(tmp_path, OVERSIZED_COPY_BACK, folder_mb=1)
    assert result["exit_code"] == 0, result["stderr"]
    assert result["stdout"] == "the host stopped reading\n"
    assert "than sandbox.commands.folder_mb (1 MiB) holds" in result["stderr"], result["stderr"]
    assert sum(result["left"].values()) <= 65 * MIB, result["left"]


def test_a_file_read_back_from_the_folder_is_read_as_untrusted(tmp_path: Path) -> None:
    """`run_command(..., read_back=[path])` returns what the command left at the path
    (`ruff check --fix FILE`): a regular file inside the folder, never through a link the
    command made, never more than the limit, only UTF-8."""
    workspace = tmp_path / "ws"
    project = tmp_path / "project"
    project.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret\n")
    (workspace / "pkg").mkdir(parents=True)
    for name in ("fixed.py", "linked.py", "big.py", "latin.py"):
        (workspace / "pkg" / name).write_text("x = 1\n")
    code = f"""\
        import os
        open("pkg/fixed.py", "w").write("x = 2\\n")
        os.remove("pkg/linked.py")
        os.symlink({str(secret)!r}, "pkg/linked.py")
        os.symlink({str(tmp_path)!r}, "up")
        open("pkg/big.py", "w").write("#" * 5000)
        open("pkg/latin.py", "wb").write("caf\\u00e9".encode("latin-1"))
    """
    (workspace / "probe.py").write_text(textwrap.dedent(code))
    runner = CommandRunner(CommandSettings(allowed=["python3"]))
    result = anyio.run(lambda: runner.run("python3", ["probe.py"], workspace, project=project))
    assert result["exit_code"] == 0, result["stderr"]
    assert left_file(workspace, "pkg/fixed.py", 4096) == "x = 2\n"
    assert os.readlink(workspace / "pkg" / "linked.py") == str(secret)  # copied back, as a link
    assert left_file(workspace, "pkg/linked.py", 4096) is None  # but never read through it
    assert left_file(workspace, "up/secret.txt", 4096) is None  # nor through a linked folder
    assert left_file(workspace, "../secret.txt", 4096) is None
    assert left_file(workspace, "pkg/big.py", 4096) is None
    assert left_file(workspace, "pkg/big.py", 5000) == "#" * 5000
    assert left_file(workspace, "pkg/latin.py", 4096) is None
    assert left_file(workspace, "pkg/missing.py", 4096) is None
