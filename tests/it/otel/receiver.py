"""A real OTLP trace receiver for tests/it/otel.rs.

Listens on 127.0.0.1 (an ephemeral port, printed as the first stdout line), accepts
`POST /v1/traces` (and `POST /v1/metrics`: one JSON line per data point, with `"metric"`) with
`application/x-protobuf` bodies (or, with `--grpc` as argv[2], the
OTLP/gRPC `TraceService/Export` call), decodes them with the official definitions (PyPI's
opentelemetry-proto) and appends one JSON line per span to the file named by argv[1].
Anything it cannot decode is answered 400 and counted in a `{"error": ...}` line.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

OUT = open(sys.argv[1], "a", buffering=1)


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def write_spans(req):
    for rs in req.resource_spans:
        resource = attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                OUT.write(json.dumps({
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": s.kind,
                    "start": s.start_time_unix_nano,
                    "end": s.end_time_unix_nano,
                    "attributes": attrs(s.attributes),
                    "events": [{"name": e.name, "time": e.time_unix_nano,
                                "attributes": attrs(e.attributes)} for e in s.events],
                    "status": {"code": s.status.code, "message": s.status.message},
                    "scope": ss.scope.name,
                    "resource": resource,
                }) + "\n")


def write_points(req):
    for rm in req.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                for p in getattr(m, kind).data_points:
                    line = {"metric": m.name, "unit": m.unit, "kind": kind,
                            "attributes": attrs(p.attributes), "time": p.time_unix_nano}
                    if kind == "exponential_histogram":
                        line.update(count=p.count, sum=p.sum, scale=p.scale,
                                    zero_count=p.zero_count, offset=p.positive.offset,
                                    bucket_counts=list(p.positive.bucket_counts))
                    else:
                        line.update(value=p.as_int if p.WhichOneof("value") == "as_int"
                                    else p.as_double,
                                    monotonic=getattr(m, kind).is_monotonic,
                                    temporality=getattr(m, kind).aggregation_temporality)
                    OUT.write(json.dumps(line) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path == "/v1/metrics":
            req = metrics_service_pb2.ExportMetricsServiceRequest()
            try:
                req.ParseFromString(body)
            except Exception as e:  # noqa: BLE001 - any decode failure is the test's failure
                OUT.write(json.dumps({"error": str(e)}) + "\n")
                return self.answer(400)
            write_points(req)
            return self.answer(
                200, metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString())
        if self.path != "/v1/traces":
            return self.answer(404)
        req = trace_service_pb2.ExportTraceServiceRequest()
        try:
            req.ParseFromString(body)
        except Exception as e:  # noqa: BLE001 - any decode failure is the test's failure
            OUT.write(json.dumps({"error": str(e)}) + "\n")
            return self.answer(400)
        write_spans(req)
        self.answer(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

    def answer(self, code, body=b""):
        self.send_response(code)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if sys.argv[2:] == ["--grpc"]:
    from concurrent import futures
    import grpc

    def export(request, context):
        write_spans(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(
            export,
            request_deserializer=trace_service_pb2.ExportTraceServiceRequest.FromString,
            response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString,
        )},
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()
else:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
