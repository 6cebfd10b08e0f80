"""What code run in the OS sandbox can reach, and where it stops: real bubblewrap, real Python
and pytest, real sockets and processes on this host (run as root in CI, where the kernel does
not apply RLIMIT_NPROC). Each command is bounded in time and in what it creates."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from remora.config.settings import CommandSettings
from remora.sandbox import seccomp
from remora.sandbox.commands import CommandRunner, SandboxFailed
from remora.sandbox.confinement import SandboxUnavailable, confinement


def run_python(
    tmp_path: Path, code: str, *, project: Path | None = None, **settings: Any
) -> dict[str, Any]:
    """`code` as a script in a workspace of its own, run with Remora's Python in the sandbox."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "probe.py").write_text(textwrap.dedent(code))
    if project is None:
        project = tmp_path / "project"
        project.mkdir(exist_ok=True)
    runner = CommandRunner(CommandSettings(allowed=["python3"], **settings))
    return anyio.run(lambda: runner.run("python3", ["probe.py"], workspace, project=project))


def test_the_sandbox_shows_only_what_the_program_needs(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not for the sandbox\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "mod.py").write_text("x = 1\n")
    code = f"""\
        import json, os
        def write(path):
            try:
                open(path, "w").write("x")
                return "written"
            except OSError as exc:
                return type(exc).__name__ + " " + str(exc.errno)
        print(json.dumps({{
            "top": sorted(os.listdir("/")),
            "etc": sorted(os.listdir("/etc")),
            "shadow": os.path.exists("/etc/shadow"),
            "secret": os.path.exists({str(secret)!r}),
            "secret_folder": os.path.exists({str(secret.parent)!r}),
            "root": os.listdir("/root") if os.path.isdir("/root") else None,
            "project": open({str(project / "mod.py")!r}).read(),
            "write_project": write({str(project / "new.py")!r}),
            "write_workspace": write("out.txt"),
            "write_root": write("/pwned"),
            "write_dev": write("/dev/pwned"),
            "write_usr": write("/usr/pwned"),
            "home": os.environ["HOME"],
            "tmpdir": os.environ["TMPDIR"],
            "write_home": write(os.path.join(os.environ["HOME"], "x")),
        }}))
    """
    result = run_python(tmp_path, code, project=project)
    assert result["exit_code"] == 0, result["stderr"]
    seen = json.loads(result["stdout"])
    # the system's folders, the tmpfs, and the first folders of the bound paths: no other
    expected = {"bin", "dev", "etc", "lib", "lib64", "proc", "sbin", "tmp", "usr"}
    bound = [sys.prefix, sys.base_prefix, str(project), *filter(None, sys.path)]
    host_roots = {Path(path).parts[1] for path in bound if len(Path(path).parts) > 1}
    assert expected <= set(seen["top"]) <= expected | host_roots | {"lib32", "libx32"}
    assert seen["etc"] == ["ld.so.cache", "localtime"]
    assert seen["shadow"] is False
    assert seen["secret"] is False and seen["secret_folder"] is False
    if seen["root"] is not None:  # only the interpreter's installation, e.g. ~/.pyenv
        assert ".ssh" not in seen["root"] and ".bash_history" not in seen["root"]
    assert seen["project"] == "x = 1\n"
    assert seen["write_project"] == "OSError 30"  # EROFS
    assert seen["write_workspace"] == "written"
    assert seen["write_root"] == seen["write_dev"] == seen["write_usr"] == "OSError 30"
    assert (seen["home"], seen["tmpdir"]) == ("/tmp/.remora-home", "/tmp")
    assert seen["write_home"] == "written"
    assert not (project / "new.py").exists()


@pytest.mark.parametrize("trusted", [True, False])
def test_pytest_runs_with_a_projects_own_virtual_environment(tmp_path: Path, trusted: bool) -> None:
    """The project's .venv, a package installed in it from a folder outside the project (as an
    editable install adds it to sys.path), and pytest: all visible, nothing beside them, when
    the environment is the user's (theirs, or a trusted project's). An untrusted one (a cloned
    repository may ship it) is believed only about its own installation: the outside folder is
    not shown, whatever its `.pth` files say."""
    project, library = tmp_path / "project", tmp_path / "library_src"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")],
        check=True,
        timeout=60,
    )
    python = project / ".venv" / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    pytest_home = Path(pytest.__file__).parent.parent
    Path(site, "deps.pth").write_text(f"{library}\n{pytest_home}\n")
    library.mkdir()
    (library / "helper_lib.py").write_text("def double(x):\n    return 2 * x\n")
    (tmp_path / "library_sibling").mkdir()
    (project / "test_uses_lib.py").write_text(
        "import os, sys\n"
        "import helper_lib\n\n"
        "def test_double():\n"
        "    assert helper_lib.double(2) == 4\n"
        f"    assert sys.prefix == {str(project / '.venv')!r}\n"
        f"    assert not os.path.exists({str(tmp_path / 'library_sibling')!r})\n"
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "test_uses_lib.py").symlink_to(project / "test_uses_lib.py")
    runner = CommandRunner(CommandSettings(python=python, python_trusted=trusted))
    result = anyio.run(
        lambda: runner.run("python", ["-m", "pytest", "-q"], workspace, project=project)
    )
    if trusted:
        assert result["exit_code"] == 0, result["stdout"] + result["stderr"]
        assert "1 passed" in result["stdout"]
    else:
        assert "No module named 'helper_lib'" in result["stdout"], result["stdout"]


def test_unix_sockets_on_the_host_cannot_be_reached(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    path_listener = socket.socket(socket.AF_UNIX)
    path_listener.bind(str(project / "host.sock"))
    abstract_name = f"\0remora-test-{os.getpid()}"
    abstract_listener = socket.socket(socket.AF_UNIX)
    abstract_listener.bind(abstract_name)
    with path_listener, abstract_listener:
        for listener in (path_listener, abstract_listener):
            listener.listen()
            listener.settimeout(0.1)
        code = f"""\
            import json, socket
            def connect(address):
                try:
                    socket.socket(socket.AF_UNIX).connect(address)
                    return "connected"
                except OSError as exc:
                    return type(exc).__name__
            def pair(kind):
                try:
                    a, b = socket.socketpair(socket.AF_UNIX, kind)
                    a.sendall(b"x")
                    return b.recv(1).decode()
                except OSError as exc:
                    return type(exc).__name__
            print(json.dumps({{
                "path": connect({str(project / "host.sock")!r}),
                "abstract": connect({abstract_name!r}),
                "stream_pair": pair(socket.SOCK_STREAM),
                "datagram_pair": pair(socket.SOCK_DGRAM),
                "inet": socket.socket(socket.AF_INET).family.name,
            }}))
        """
        result = run_python(tmp_path, code, project=project)
        assert result["exit_code"] == 0, result["stderr"]
        assert json.loads(result["stdout"]) == {
            "path": "PermissionError",
            "abstract": "PermissionError",
            "stream_pair": "x",  # asyncio and multiprocessing need these
            "datagram_pair": "PermissionError",  # sendto() could address any socket file
            "inet": "AF_INET",
        }
        for listener in (path_listener, abstract_listener):
            with pytest.raises(TimeoutError):
                listener.accept()


def test_pytest_with_asyncio_and_multiprocessing_still_works(tmp_path: Path) -> None:
    code = """\
        import asyncio, multiprocessing, sys
        import pytest
        open("test_it.py", "w").write(
            "import asyncio, multiprocessing\\n"
            "def test_it():\\n"
            "    asyncio.run(asyncio.sleep(0))\\n"
            "    with multiprocessing.Pool(2) as pool:\\n"
            "        assert pool.map(abs, [-1, -2]) == [1, 2]\\n"
        )
        sys.exit(pytest.main(["-q", "test_it.py"]))
    """
    result = run_python(tmp_path, code)
    assert result["exit_code"] == 0, result["stdout"] + result["stderr"]
    assert "1 passed" in result["stdout"]


def test_a_fork_bomb_stops_at_the_process_limit(tmp_path: Path) -> None:
    limit = 24
    if not confinement(CommandSettings(max_processes=limit)).process_limit_enforced:
        pytest.skip("root without a writable pids cgroup: no process limit here (cgroups.py)")
    # Bounded: at most 200 forks, children that sleep 30 s unless the sandbox ends them.
    code = """\
        import errno, os, time
        made = 0
        try:
            while made < 200:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                made += 1
            print("made", made)
        except OSError as exc:
            print("stopped", made, errno.errorcode[exc.errno])
    """
    started = time.monotonic()
    result = run_python(tmp_path, code, max_processes=limit, timeout_s=20)
    assert result["exit_code"] == 0, result["stderr"]
    word, made, why = result["stdout"].split()
    assert (word, why) == ("stopped", "EAGAIN")
    assert limit // 2 <= int(made) < limit
    assert time.monotonic() - started < 10  # the children did not outlive the sandbox
    workspace = str(tmp_path / "ws")
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd") == workspace:
                left.append(pid)
        except OSError:
            continue
    assert left == []


def test_filling_tmp_stops_at_its_size(tmp_path: Path) -> None:
    code = """\
        import errno, json, os
        def fill(folder):
            written = 0
            try:
                with open(os.path.join(folder, "fill"), "wb") as file:
                    while written < 64:
                        file.write(b"x" * 1024 * 1024)
                        file.flush()
                        written += 1
            except OSError as exc:
                return [written, errno.errorcode[exc.errno]]
            return [written, None]
        print(json.dumps({"tmp": fill(os.environ["TMPDIR"]), "shm": fill("/dev/shm")}))
    """
    result = run_python(tmp_path, code, tmp_mb=4)
    assert result["exit_code"] == 0, result["stderr"]
    seen = json.loads(result["stdout"])
    for folder in ("tmp", "shm"):
        written, why = seen[folder]
        assert why == "ENOSPC" and 2 <= written <= 4, (folder, seen)


def test_a_cpu_burning_loop_is_stopped_by_the_cpu_limit(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_python(tmp_path, "while True:\n    pass\n", cpu_time_s=1, timeout_s=30)
    assert result["timed_out"] is False
    assert result["exit_code"] == 128 + 24  # SIGXCPU, reported by bwrap as 128 + signal
    assert time.monotonic() - started < 10


def test_root_inside_cannot_remount_the_project_writable(tmp_path: Path) -> None:
    """As root, bwrap would keep every capability inside its user namespace: enough to
    remount the project read-write. The sandbox drops them and refuses nested namespaces."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "victim.txt").write_text("the user's file\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = (
        f"mount -o remount,rw,bind {project}; "
        f"unshare -U -r -m true; "
        f"echo pwned > {project}/victim.txt; "
        "grep CapEff /proc/self/status"
    )
    runner = CommandRunner(CommandSettings(allowed=["sh"]))
    result = anyio.run(lambda: runner.run("sh", ["-c", script], workspace, project=project))
    assert "CapEff:\t0000000000000000" in result["stdout"], result
    assert (project / "victim.txt").read_text() == "the user's file\n"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x32 ABI exists on x86_64 only")
def test_a_system_call_of_another_abi_kills_the_process(tmp_path: Path) -> None:
    """x32 calls (bit 30 in the number) reach the kernel with the x86_64 arch value; the
    filter would not recognise their socket() number, so any of them ends the process."""
    code = "import ctypes\nctypes.CDLL(None).syscall(0x40000000 | 39)\nprint('survived')\n"
    result = run_python(tmp_path, code)
    assert result["exit_code"] == 128 + 31  # SIGSYS
    assert "survived" not in result["stdout"]


def test_an_unknown_architecture_has_no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(seccomp.UnsupportedArchitecture, match="riscv64"):
        seccomp.architecture("riscv64")
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    with pytest.raises(SandboxUnavailable, match="no seccomp filter for the riscv64"):
        confinement(CommandSettings())


def test_a_sandbox_that_cannot_start_raises_sandbox_failed(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    runner = CommandRunner(CommandSettings(allowed=["sh"]))
    gone = tmp_path / "deleted-project"
    with pytest.raises(SandboxFailed, match=r"bwrap: Can't find source path .*deleted-project"):
        anyio.run(lambda: runner.run("sh", ["-c", "exit 0"], workspace, project=gone))
    # A program that fails and says "bwrap:" is still the program's result.
    fake = "echo 'bwrap: not really' >&2; exit 1"
    result = anyio.run(lambda: runner.run("sh", ["-c", fake], workspace, project=tmp_path))
    assert result["exit_code"] == 1 and result["stderr"] == "bwrap: not really\n"
