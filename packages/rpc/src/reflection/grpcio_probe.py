"""Independent gRPC client (python3-grpcio, C core) for the reflection tests.

Speaks raw protobuf bytes so it needs no generated code: health Check,
reflection list_services and file_containing_symbol (v1 or v1alpha), a unary
call and a failing call. Prints one JSON object.
"""
import json
import sys

import grpc


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_str(num, s):
    b = s.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b


def read_varint(buf, i):
    """The varint at buf[i:], and the index after it."""
    v, shift = 0, 0
    while True:
        b = buf[i]; i += 1
        v |= (b & 0x7F) << shift; shift += 7
        if not b & 0x80:
            return v, i


def parse(buf):
    """Top-level fields as (number, value): varints as int, bytes as bytes."""
    i, out = 0, []
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
            out.append((num, v))
        elif wt == 2:
            ln, i = read_varint(buf, i)
            out.append((num, buf[i:i + ln])); i += ln
        else:
            raise ValueError("unexpected wire type %d" % wt)
    return out


def main():
    target, version = sys.argv[1], sys.argv[2]
    ch = grpc.insecure_channel(target)
    ident = lambda b: b
    result = {}

    check = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=ident, response_deserializer=ident)
    result["health"] = dict(parse(check(b"", timeout=10))).get(1, 0)

    refl = ch.stream_stream(
        "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version,
        request_serializer=ident,
        response_deserializer=ident,
    )
    reqs = [field_str(7, "*"), field_str(4, "rpctest.v1.LibraryService.Echo"), field_str(4, "no.such.Symbol")]
    responses = list(refl(iter(reqs), timeout=10))
    services, files, error = [], [], None
    for r in responses:
        for num, val in parse(r):
            if num == 6:  # list_services_response
                for n, svc in parse(val):
                    services.append(dict(parse(svc))[1].decode())
            elif num == 4:  # file_descriptor_response
                for n, fdp in parse(val):
                    files.append(dict(parse(fdp))[1].decode())
            elif num == 7:  # error_response
                error = dict(parse(val)).get(1)
    result["services"] = services
    result["files"] = files
    result["error_code"] = error

    echo = ch.unary_unary("/rpctest.v1.LibraryService/Echo", request_serializer=ident, response_deserializer=ident)
    result["echo"] = dict(parse(echo(field_str(1, "hi"), timeout=10))).get(1, b"").decode()

    fail = ch.unary_unary("/rpctest.v1.LibraryService/Fail", request_serializer=ident, response_deserializer=ident)
    try:
        fail(field_str(1, "not_found") + field_str(3, "gone"), timeout=10)
        result["fail"] = "no error"
    except grpc.RpcError as e:
        result["fail"] = e.code().name
        result["fail_message"] = e.details()
        result["has_status_details"] = any(k == "grpc-status-details-bin" for k, _ in e.trailing_metadata())
    print(json.dumps(result))


main()
