"""A flood of calls on ONE channel from python3-grpcio (gRPC C core), whose
default metadata limits are the strictest of the usual gRPC peers.

stdin: {"target": "host:port", "method": "/pkg.Service/Method",
        "requests": [base64 request bytes...], "rounds": n,
        "final": {"method": "/pkg.Service/Method", "request": base64}}
Sends every request `rounds` times, all in flight at once, then the final
call on the same channel. Prints one JSON object: status code names and
counts, the longest status message and trailing metadata seen, the codes of
the final call.
"""
import base64
import json
import sys

import grpc


def ident(b):
    return b


def main():
    spec = json.load(sys.stdin)
    channel = grpc.insecure_channel(spec["target"])
    call = channel.unary_unary(spec["method"], request_serializer=ident, response_deserializer=ident)
    requests = [base64.b64decode(r) for r in spec["requests"]]
    futures = [call.future(r, timeout=60) for _ in range(spec["rounds"]) for r in requests]
    codes, samples = {}, {}
    max_message = max_trailing = 0
    for f in futures:
        try:
            f.result()
            name = "OK"
        except grpc.RpcError as e:
            name = e.code().name
            details = e.details() or ""
            max_message = max(max_message, len(details.encode()))
            trailing = e.trailing_metadata() or ()
            max_trailing = max(max_trailing, sum(len(k) + len(v) for k, v in trailing))
            samples.setdefault(name, details[:200])
        codes[name] = codes.get(name, 0) + 1
    final = spec["final"]
    final_call = channel.unary_unary(final["method"], request_serializer=ident, response_deserializer=ident)
    try:
        final_call(base64.b64decode(final["request"]), timeout=60)
        final_code = "OK"
    except grpc.RpcError as e:
        final_code = "%s: %s" % (e.code().name, e.details())
    channel.close()
    print(json.dumps({"codes": codes, "samples": samples, "max_message": max_message,
                      "max_trailing": max_trailing, "final": final_code}))


main()
