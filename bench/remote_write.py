#!/usr/bin/env python3
"""`sloburn run --out prometheus-rw` against a receiver that answers, one that is down and one
that never answers: the run's achieved requests, dropped iterations, p95 and CPU per request,
beside the same run with no push. Each receiver state runs --passes times, interleaved.

    python3 -u bench/remote_write.py [--sloburn target/debug/sloburn] [--rate 1000] [--passes 3]

Outside CI. Only 127.0.0.1: `sloburn target`, the receivers and the runs are started here on
free ports. Bounded: passes x 4 runs of --seconds (default 5) each.
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import HOST, free_port


class Accept(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sloburn", default="target/debug/sloburn")
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--passes", type=int, default=3)
    a = ap.parse_args()

    tport = free_port()
    target = subprocess.Popen([a.sloburn, "target", "--listen", f"{HOST}:{tport}", "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ok = ThreadingHTTPServer((HOST, 0), Accept)
    threading.Thread(target=ok.serve_forever, daemon=True).start()
    stalled = socket.socket()
    stalled.bind((HOST, 0))
    stalled.listen(64)
    receivers = {
        "no push": None,
        "answers (204)": f"http://{HOST}:{ok.server_address[1]}/api/v1/write?interval=100ms",
        "down (closed port)": f"http://{HOST}:{free_port()}/api/v1/write?interval=100ms",
        "never answers": f"http://{HOST}:{stalled.getsockname()[1]}/api/v1/write?interval=100ms",
    }
    time.sleep(1)
    rows = {k: [] for k in receivers}
    try:
        with tempfile.TemporaryDirectory() as d:
            for _ in range(a.passes):
                for name, url in receivers.items():
                    export = os.path.join(d, "s.json")
                    cmd = [a.sloburn, "run", "--url", f"http://{HOST}:{tport}/", "--quiet",
                           "--rate", f"{a.rate}/s", "--duration", f"{a.seconds}s",
                           "--summary-export", export]
                    if url:
                        cmd += ["--out", f"prometheus-rw={url}"]
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.seconds + 60)
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                    m = json.load(open(export))["metrics"]
                    reqs = m["http_reqs"]["count"]
                    line = [l for l in out.stderr.splitlines() if l.startswith("prometheus-rw:")]
                    rows[name].append((reqs, m.get("dropped_iterations", {}).get("count", 0),
                                       m["http_req_duration"]["p(95)"], cpu / max(reqs, 1) * 1e6,
                                       line[0] if line else "-"))
    finally:
        target.kill()
        ok.shutdown()
    print(f"rate {a.rate}/s for {a.seconds}s, {a.passes} passes, binary {a.sloburn}")
    print(f"{'receiver':<20} {'requests':>9} {'dropped it.':>11} {'p95 ms':>7} {'CPU us/req':>10}  push line (last pass)")
    for name, rs in rows.items():
        med = lambda i: statistics.median(r[i] for r in rs)
        print(f"{name:<20} {med(0):>9.0f} {med(1):>11.0f} {med(2):>7.3f} {med(3):>10.1f}  {rs[-1][4]}")


if __name__ == "__main__":
    main()
