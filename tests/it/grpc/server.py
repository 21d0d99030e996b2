"""The gRPC server of tests/it/grpc.rs: grpcio on 127.0.0.1, an ephemeral port printed on
stdout's first line.

    server.py DESCRIPTORS [--reflection both|v1|v1alpha|none] [--tls CERT.pem KEY.pem]
              [--token TOKEN --seen FILE] [--hostile endless-reflection]

DESCRIPTORS is a serialized FileDescriptorSet of sloburn/test/echo.proto and its imports (the
test compiles it with protox; no protoc here either). Serves sloburn.test.Echo, the standard
health service (grpcio-health-checking) and server reflection (grpcio-reflection, which serves
v1alpha; v1 is the same servicer under v1's name, as the two speak the same messages).
With --token, every Echo call without the metadata `authorization: Bearer TOKEN` is refused
UNAUTHENTICATED, and each call let in appends its authorization value to FILE (a line each), so
a test knows what the server saw. Installed by scripts/install-otel-test-tools.sh.

Hostile answers (issue 44): `Say` with text `big` answers a 5 MB reply (past a client's 4 MiB);
with --hostile endless-reflection, v1 reflection answers any request with an endless stream of
service lists (1,000 names a message, bounded here at 100,000 messages or 60 s).
"""

import sys
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

ECHO = "sloburn.test.Echo"


def load_pool(path):
    pool = descriptor_pool.DescriptorPool()
    with open(path, "rb") as f:
        fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    for file in fds.file:
        pool.Add(file)
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(health_pb2.DESCRIPTOR.serialized_pb))
    return pool


def endless_reflection(requests, context):
    next(requests, None)
    names = [reflection_pb2.ServiceResponse(name="hostile.Service%04d" % i) for i in range(1000)]
    answer = reflection_pb2.ServerReflectionResponse(
        list_services_response=reflection_pb2.ListServiceResponse(service=names))
    started = time.monotonic()
    for _ in range(100_000):
        if not context.is_active() or time.monotonic() - started > 60:
            return
        yield answer


def main():
    mode = "both"
    if "--reflection" in sys.argv:
        mode = sys.argv[sys.argv.index("--reflection") + 1]
    pool = load_pool(sys.argv[1])
    Request = message_factory.GetMessageClass(pool.FindMessageTypeByName("sloburn.test.EchoRequest"))
    Reply = message_factory.GetMessageClass(pool.FindMessageTypeByName("sloburn.test.Reply"))

    def metadata_of(context):
        return {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}

    token = sys.argv[sys.argv.index("--token") + 1] if "--token" in sys.argv else None
    seen = sys.argv[sys.argv.index("--seen") + 1] if "--seen" in sys.argv else None
    seen_lock = threading.Lock()

    def answer(req, context):
        if token is not None:
            given = metadata_of(context).get("authorization")
            if given != "Bearer " + token:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "no valid token")
            if seen:
                with seen_lock, open(seen, "a") as f:
                    f.write(given + "\n")
        if req.delay_ms:
            # Bounded: the test's deadlines are far below this.
            time.sleep(min(req.delay_ms, 10_000) / 1000)
        if req.fail_code:
            context.abort(grpc.StatusCode(
                next(c.value for c in grpc.StatusCode if c.value[0] == req.fail_code)
            ), "failed as asked")

    flaky = {"calls": 0}
    lock = threading.Lock()

    def say(req, context):
        if req.text == "flaky":
            # Every 50th call fails UNAVAILABLE: 2 %, exactly.
            with lock:
                flaky["calls"] += 1
                fail = flaky["calls"] % 50 == 0
            if fail:
                context.abort(grpc.StatusCode.UNAVAILABLE, "flaky")
        answer(req, context)
        context.set_trailing_metadata((("x-trailer", "said"),))
        if req.text == "big":
            return Reply(text="x" * 5_000_000)
        return Reply(text=req.text, metadata=metadata_of(context))

    def count(req, context):
        answer(req, context)
        for i in range(min(req.count, 1000)):
            yield Reply(text=req.text, index=i)

    def chat(requests, context):
        for i, req in enumerate(requests):
            answer(req, context)
            yield Reply(text=req.text, index=i)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(ECHO, {
        "Say": grpc.unary_unary_rpc_method_handler(
            say, request_deserializer=Request.FromString, response_serializer=Reply.SerializeToString),
        "Count": grpc.unary_stream_rpc_method_handler(
            count, request_deserializer=Request.FromString, response_serializer=Reply.SerializeToString),
        "Chat": grpc.stream_stream_rpc_method_handler(
            chat, request_deserializer=Request.FromString, response_serializer=Reply.SerializeToString),
    }),))

    checker = health.HealthServicer()
    checker.set("", health_pb2.HealthCheckResponse.SERVING)
    checker.set(ECHO, health_pb2.HealthCheckResponse.SERVING)
    checker.set("down", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)

    names = (ECHO, health.SERVICE_NAME)
    if mode in ("both", "v1alpha"):
        reflection.enable_server_reflection(names + (reflection.SERVICE_NAME,), server, pool=pool)
    if "--hostile" in sys.argv and sys.argv[sys.argv.index("--hostile") + 1] == "endless-reflection":
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "grpc.reflection.v1.ServerReflection", {
                "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                    endless_reflection,
                    request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
                    response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString),
            }),))
    elif mode in ("both", "v1"):
        servicer = reflection.ReflectionServicer(names, pool=pool)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "grpc.reflection.v1.ServerReflection", {
                "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                    servicer.ServerReflectionInfo,
                    request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
                    response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString),
            }),))

    if "--tls" in sys.argv:
        at = sys.argv.index("--tls")
        with open(sys.argv[at + 1], "rb") as c, open(sys.argv[at + 2], "rb") as k:
            credentials = grpc.ssl_server_credentials(((k.read(), c.read()),))
        port = server.add_secure_port("127.0.0.1:0", credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    # Ends when the test kills it, or after 10 minutes whatever happens.
    server.wait_for_termination(timeout=600)


if __name__ == "__main__":
    main()
