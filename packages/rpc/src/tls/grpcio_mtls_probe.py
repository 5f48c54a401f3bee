"""Independent mutual-TLS gRPC client (python3-grpcio, C core) for the mTLS tests.

Usage: grpcio_mtls_probe.py TARGET CA_FILE [CERT_FILE KEY_FILE]
Calls grpc.health.v1.Health/Check and rpctest.v1.LibraryService/Echo with raw
protobuf bytes, and prints one JSON object: each call's result or status name.
"""
import json
import sys

import grpc


def field_str(num, s):
    b = s.encode()
    return bytes([num << 3 | 2, len(b)]) + b


def main():
    target, ca_file = sys.argv[1], sys.argv[2]
    read = lambda p: open(p, "rb").read()
    if len(sys.argv) > 4:
        creds = grpc.ssl_channel_credentials(read(ca_file), read(sys.argv[4]), read(sys.argv[3]))
    else:
        creds = grpc.ssl_channel_credentials(read(ca_file))
    ch = grpc.secure_channel(target, creds)
    ident = lambda b: b
    result = {}
    for name, path, body in [
        ("health", "/grpc.health.v1.Health/Check", b""),
        ("echo", "/rpctest.v1.LibraryService/Echo", field_str(1, "hi")),
    ]:
        call = ch.unary_unary(path, request_serializer=ident, response_deserializer=ident)
        try:
            out = call(body, timeout=10)
            result[name] = "OK"
            result[name + "_bytes"] = out.hex()
        except grpc.RpcError as e:
            result[name] = e.code().name
            result[name + "_details"] = e.details()
    print(json.dumps(result))


main()
