"""The orders-downgrade transform as a streamd native plugin in Python.

It speaks the streamd native plugin protocol v1 (proto/streamd/plugin/v1)
over gRPC, with hashicorp/go-plugin's handshake for non-Go plugins:
check the magic cookie, serve the Plugin service and grpc.health.v1
("plugin" SERVING), print "1|1|tcp|127.0.0.1:PORT|grpc" on stdout.
Needs grpcio and grpcio-health-checking (scripts/install-tools).
"""

import os
import sys
import threading
from concurrent import futures

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

import grpc  # noqa: E402
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # noqa: E402

from streamd.plugin.v1 import plugin_pb2, plugin_pb2_grpc  # noqa: E402
from downgrade import SCHEMA_HEADER, DowngradeError, downgrade_value  # noqa: E402

MAGIC_COOKIE_KEY = "STREAMD_PLUGIN_COOKIE"
MAGIC_COOKIE_VALUE = "streamd-native-plugin-7c1f0b3e9d2a"
PROTOCOL_VERSIONS = (1,)
MAX_MSG = 2**31 - 1


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Plugin(plugin_pb2_grpc.PluginServicer):
    def __init__(self, stopping):
        self.stopping = stopping

    def Manifest(self, request, context):
        return plugin_pb2.ManifestResponse(name="orders-downgrade", kind="transform", version="1.0.0", protocol=1)

    def Init(self, request, context):
        return plugin_pb2.InitResponse()

    def Shutdown(self, request, context):
        return plugin_pb2.ShutdownResponse()

    def Process(self, request, context):
        if request.op != plugin_pb2.OP_TRANSFORM:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "orders-downgrade is a transform; op %d" % request.op)
        results = []
        for rec in request.records:
            try:
                value = downgrade_value(rec.value if rec.HasField("value") else None)
            except DowngradeError as e:
                results.append(plugin_pb2.Result(error=str(e)))
                continue
            out = plugin_pb2.Record(offset=-1, partition=-1, timestamp_ms=rec.timestamp_ms, value=value)
            if rec.HasField("key"):
                out.key = rec.key
            for h in rec.headers:
                if h.name != SCHEMA_HEADER:
                    out.headers.append(h)
            out.headers.append(plugin_pb2.Header(name=SCHEMA_HEADER, value=b"1"))
            results.append(plugin_pb2.Result(records=plugin_pb2.Records(records=[out])))
        return plugin_pb2.ProcessResponse(results=results)


def controller_and_stdio(server, stopping):
    """go-plugin's own services: GRPCController.Shutdown stops the process;
    GRPCStdio.StreamStdio is a stream that stays open and silent (this
    plugin writes its logs to stderr)."""

    def shutdown(request, context):
        stopping.set()
        threading.Thread(target=lambda: server.stop(grace=1), daemon=True).start()
        return b""

    def stream_stdio(request, context):
        stopping.wait()
        return iter(())

    ident = lambda b: b  # noqa: E731  (google.protobuf.Empty is b"")
    return [
        grpc.method_handlers_generic_handler(
            "plugin.GRPCController",
            {"Shutdown": grpc.unary_unary_rpc_method_handler(shutdown, request_deserializer=ident, response_serializer=ident)},
        ),
        grpc.method_handlers_generic_handler(
            "plugin.GRPCStdio",
            {"StreamStdio": grpc.unary_stream_rpc_method_handler(stream_stdio, request_deserializer=ident, response_serializer=ident)},
        ),
    ]


def main():
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        log("This is a streamd native plugin: streamd runs it (plugin = \"native:PATH\"), not you.")
        return 1
    offered = {int(v) for v in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", "1").split(",") if v.strip().isdigit()}
    common = offered.intersection(PROTOCOL_VERSIONS)
    if not common:
        log("orders-downgrade speaks protocol %s; streamd offers %s" % (list(PROTOCOL_VERSIONS), sorted(offered)))
        return 1
    version = max(common)

    stopping = threading.Event()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[("grpc.max_receive_message_length", MAX_MSG), ("grpc.max_send_message_length", MAX_MSG)],
    )
    plugin_pb2_grpc.add_PluginServicer_to_server(Plugin(stopping), server)
    hs = health.HealthServicer()
    hs.set("plugin", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(hs, server)
    server.add_generic_rpc_handlers(controller_and_stdio(server, stopping))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("1|%d|tcp|127.0.0.1:%d|grpc" % (version, port), flush=True)
    log("orders-downgrade (python %s, grpcio %s) serving protocol v%d on 127.0.0.1:%d" % (sys.version.split()[0], grpc.__version__, version, port))
    server.wait_for_termination()
    stopping.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
