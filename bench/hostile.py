#!/usr/bin/env python3
"""A hostile target for soaks, on 127.0.0.1 only: answers every HTTP request with a body that
never ends (64 KiB chunks as fast as the peer reads), and every WebSocket upgrade (`/ws`) with a
flood of pings and frames that never match an `expect`. A load tool's bounds on body size,
frames and session time are what keep it alive against this.

    python3 bench/hostile.py --port PORT

Stdlib only (asyncio); no third-party WebSocket server, so the flood is exactly what is
written here.
"""
import argparse
import asyncio
import base64
import hashlib

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CHUNK = b"x" * 65536


async def endless_body(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n")
    frame = b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n"
    while True:
        writer.write(frame)
        await writer.drain()


async def ping_flood(writer: asyncio.StreamWriter, key: bytes) -> None:
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    writer.write(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n"
                 b"connection: Upgrade\r\nsec-websocket-accept: " + accept + b"\r\n\r\n")
    ping = b"\x89\x7d" + b"p" * 125          # FIN + ping, 125-byte payload
    text = b"\x81\x7e\x10\x00" + b"n" * 4096  # FIN + text, 4 KiB that matches nothing
    while True:
        writer.write(ping * 32 + text)
        await writer.drain()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        key = None
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"sec-websocket-key":
                key = value.strip()
        if key is not None:
            await ping_flood(writer, key)
        else:
            await endless_body(writer)
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
            asyncio.TimeoutError):
        pass
    finally:
        writer.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    server = await asyncio.start_server(handle, "127.0.0.1", args.port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
