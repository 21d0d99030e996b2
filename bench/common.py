"""What the benchmark programs share: loopback ports."""

import socket

HOST = "127.0.0.1"


def free_port() -> int:
    """A free port on 127.0.0.1 (bound then released; the race is acceptable for benchmarks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]
