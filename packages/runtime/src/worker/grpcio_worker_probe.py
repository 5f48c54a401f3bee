"""Independent gRPC client (python3-grpcio, C core) for the worker mTLS tests.

Usage: grpcio_worker_probe.py TARGET CA_FILE [CERT_FILE KEY_FILE]
Calls grpc.health.v1.Health/Check and runtime.v1.RuntimeService/Invoke (a
server stream) with raw protobuf bytes, for the session and with the metadata
of the JSON object on stdin ({"session": ..., "metadata": {...}}), and prints
one JSON object: each call's result or status name.
"""
import json
import sys

import grpc


def field_bytes(num, b):
    return bytes([num << 3 | 2, len(b)]) + b


def main():
    target, ca_file = sys.argv[1], sys.argv[2]
    read = lambda p: open(p, "rb").read()
    if len(sys.argv) > 4:
        creds = grpc.ssl_channel_credentials(read(ca_file), read(sys.argv[4]), read(sys.argv[3]))
    else:
        creds = grpc.ssl_channel_credentials(read(ca_file))
    given = json.load(sys.stdin)
    metadata = list(given["metadata"].items())
    ch = grpc.secure_channel(target, creds)
    ident = lambda b: b
    result = {}
    try:
        ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=ident, response_deserializer=ident)(b"", timeout=10)
        result["health"] = "OK"
    except grpc.RpcError as e:
        result["health"] = e.code().name
    # InvokeRequest{session_id = 1, messages = 4 {role = 1, content = 2}}
    message = field_bytes(1, b"user") + field_bytes(2, b"hi")
    request = field_bytes(1, given["session"].encode()) + field_bytes(4, message)
    invoke = ch.unary_stream("/runtime.v1.RuntimeService/Invoke", request_serializer=ident, response_deserializer=ident)
    try:
        result["events"] = len(list(invoke(request, metadata=metadata, timeout=10)))
        result["invoke"] = "OK"
    except grpc.RpcError as e:
        result["invoke"] = e.code().name
        result["invoke_details"] = e.details()
    print(json.dumps(result))


main()
