"""The gRPC server of tests/it/grpc_echo.rs: grpcio on 127.0.0.1 that echoes every call's
metadata back everywhere a client may show it, an ephemeral port printed on stdout's first line.

    echo_metadata.py DESCRIPTORS

DESCRIPTORS is a serialized FileDescriptorSet of sloburn/test/echo.proto (as for server.py).
`sloburn.test.Echo/Say` sends the request's metadata back as initial metadata (`echo-NAME`),
as trailing metadata (`trailer-NAME`) and in the reply (`metadata`, and `text` as
`NAME=VALUE;...`); with request text `fail` it answers INTERNAL instead, with the metadata in
the status message. Ends when the test kills it, or after 10 minutes.
"""

import sys
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def main():
    pool = descriptor_pool.DescriptorPool()
    with open(sys.argv[1], "rb") as f:
        for file in descriptor_pb2.FileDescriptorSet.FromString(f.read()).file:
            pool.Add(file)
    Request = message_factory.GetMessageClass(pool.FindMessageTypeByName("sloburn.test.EchoRequest"))
    Reply = message_factory.GetMessageClass(pool.FindMessageTypeByName("sloburn.test.Reply"))

    def say(req, context):
        seen = [(k, v) for k, v in context.invocation_metadata()
                if isinstance(v, str) and not k.startswith(("grpc-", ":")) and k not in ("user-agent", "te")]
        flat = ";".join("%s=%s" % kv for kv in seen)
        context.send_initial_metadata(tuple(("echo-" + k, v) for k, v in seen))
        context.set_trailing_metadata(tuple(("trailer-" + k, v) for k, v in seen))
        if req.text == "fail":
            context.abort(grpc.StatusCode.INTERNAL, "echo: " + flat)
        return Reply(text=flat, metadata=dict(seen))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("sloburn.test.Echo", {
        "Say": grpc.unary_unary_rpc_method_handler(
            say, request_deserializer=Request.FromString, response_serializer=Reply.SerializeToString),
    }),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination(timeout=600)


if __name__ == "__main__":
    main()
