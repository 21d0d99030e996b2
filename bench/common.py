"""What the benchmark programs share: loopback ports, the sloburn binary they measure, and
stopping the processes they started."""

import os
import socket
import subprocess
import sys
from pathlib import Path

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A free port on 127.0.0.1 (bound then released; the race is acceptable for benchmarks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def sloburn_arg(ap, profile: str = "release") -> None:
    """`--sloburn PATH`: the binary to measure, `$SLOBURN` or the repository's build."""
    ap.add_argument("--sloburn", default=os.environ.get(
        "SLOBURN", str(REPO_ROOT / "target" / profile / "sloburn")))


def require_binary(path: str) -> bool:
    """Whether the binary is there; says how to build it when not."""
    if Path(path).exists():
        return True
    print(f"no sloburn binary at {path}: cargo build --release", file=sys.stderr)
    return False


def stop(*procs, timeout: float = 30) -> None:
    """Terminates each process and waits for it, killing one that outlives `timeout`."""
    for p in procs:
        if p is None or p.poll() is not None:
            continue
        p.terminate()
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
