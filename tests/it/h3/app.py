"""The HTTP/3 test server's app (tests/it/h3.rs), served by hypercorn over QUIC and TCP.

/count            how many requests the app served before this one (the server's own count)
/hold/MS          answers 200 after MS milliseconds
/status/N         answers status N
/login   (POST)   {"token": "tok-<n>"}, a fresh token each time
/cart             200 when `authorization: Bearer tok-<n>` names a token /login gave, else 401
/huge-head        a 1 MiB response header (hostile)
/huge-body        64 MiB of body in 64 KiB chunks (hostile)
anything else     200 "ok"
"""
import asyncio
import json

served = 0
tokens = set()


async def app(scope, receive, send):
    global served
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path != "/count":
        served += 1
    while True:
        msg = await receive()
        if not msg.get("more_body"):
            break
    status, headers, body = 200, [(b"content-type", b"text/plain")], b"ok"
    if path == "/count":
        body = str(served).encode()
    elif path.startswith("/hold/"):
        await asyncio.sleep(int(path[6:]) / 1000)
    elif path.startswith("/status/"):
        status = int(path[8:])
    elif path == "/login":
        token = "tok-%d" % served
        tokens.add(token)
        headers = [(b"content-type", b"application/json")]
        body = json.dumps({"token": token}).encode()
    elif path == "/cart":
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        ok = auth.startswith("Bearer ") and auth[7:] in tokens
        status, body = (200, b"cart") if ok else (401, b"no token")
    elif path == "/huge-head":
        headers.append((b"x-huge", b"a" * (1 << 20)))
    elif path == "/huge-body":
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        chunk = b"b" * (64 << 10)
        for _ in range(1024):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
