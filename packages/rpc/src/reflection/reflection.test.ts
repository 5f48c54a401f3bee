import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { ServerReflectionRequestSchema } from "@platform/gen/grpc/reflection/v1/reflection_pb";
import { LibraryService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { testServer } from "../testing/fixture.ts";
import { Reflector } from "./reflection.ts";

const run = promisify(execFile);
const buf = fileURLToPath(new URL("../../../../node_modules/.bin/buf", import.meta.url));
const python = "/usr/bin/python3";
const probe = fileURLToPath(new URL("./grpcio_probe.py", import.meta.url));

test("file_containing_symbol returns the file and its transitive imports", () => {
  const r = new Reflector([LibraryService.file], [LibraryService.typeName]);
  const res = r.respond(
    create(ServerReflectionRequestSchema, {
      messageRequest: { case: "fileContainingSymbol", value: "rpctest.v1.LibraryService.GetBook" },
    }),
  );
  assert.equal(res.messageResponse?.case, "fileDescriptorResponse");
  const names = (res.messageResponse!.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto.map(
    (b) => fromBinary(FileDescriptorProtoSchema, b).name,
  );
  assert.equal(names[0], "rpctest/v1/rpctest.proto");
  for (const dep of [
    "google/api/annotations.proto",
    "google/api/http.proto",
    "google/protobuf/descriptor.proto",
    "google/protobuf/timestamp.proto",
    "platform/api/v1/options.proto",
  ])
    assert.ok(names.includes(dep), dep);
  assert.equal(new Set(names).size, names.length);
});

test("symbols of every kind resolve to their file", () => {
  const r = new Reflector([LibraryService.file], [LibraryService.typeName]);
  for (const symbol of [
    "rpctest.v1.LibraryService",
    "rpctest.v1.LibraryService.GetBook",
    "rpctest.v1.Book",
    "rpctest.v1.Book.title",
    "rpctest.v1.Kind",
    "rpctest.v1.KIND_NOVEL",
    "google.protobuf.Timestamp",
  ]) {
    const res = r.respond(
      create(ServerReflectionRequestSchema, { messageRequest: { case: "fileContainingSymbol", value: symbol } }),
    );
    assert.equal(res.messageResponse?.case, "fileDescriptorResponse", symbol);
  }
  const ext = r.respond(
    create(ServerReflectionRequestSchema, {
      messageRequest: { case: "allExtensionNumbersOfType", value: "google.protobuf.MethodOptions" },
    }),
  );
  assert.equal(ext.messageResponse?.case, "allExtensionNumbersResponse");
  const numbers = (ext.messageResponse!.value as { extensionNumber: number[] }).extensionNumber;
  for (const n of [72295728, 51001, 51002]) assert.ok(numbers.includes(n), String(n));
});

test("unknown symbol and file → NOT_FOUND error response", () => {
  const r = new Reflector([LibraryService.file], [LibraryService.typeName]);
  for (const messageRequest of [
    { case: "fileContainingSymbol", value: "x.Y" },
    { case: "fileByFilename", value: "x.proto" },
  ] as const) {
    const res = r.respond(create(ServerReflectionRequestSchema, { messageRequest }));
    assert.equal(res.messageResponse?.case, "errorResponse");
    assert.equal((res.messageResponse!.value as { errorCode: number }).errorCode, 5);
  }
});

describe("reflection against a live server", () => {
  const { server } = testServer();
  let url = "";
  let port = 0;
  before(async () => {
    ({ url, port } = await server.listen());
  });
  after(() => server.close());

  test("buf curl --reflect --list-methods (v1) needs no schema", async () => {
    const { stdout } = await run(buf, [
      "curl",
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "--reflect",
      "--list-methods",
      url,
    ]);
    const methods = stdout.trim().split("\n");
    for (const m of [
      "rpctest.v1.LibraryService/GetShelf",
      "rpctest.v1.StreamService/Tick",
      "grpc.health.v1.Health/Watch",
      "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    ])
      assert.ok(methods.includes(m), m);
  });

  test("buf curl calls a method by reflection (v1 and v1alpha)", async () => {
    for (const proto of ["grpc-v1", "grpc-v1alpha"]) {
      const { stdout } = await run(buf, [
        "curl",
        "--protocol",
        "grpc",
        "--http2-prior-knowledge",
        "--reflect-protocol",
        proto,
        "-d",
        '{"text":"hello","repeat":2}',
        `${url}/rpctest.v1.LibraryService/Echo`,
      ]);
      assert.equal(JSON.parse(stdout).text, "hellohello", proto);
    }
  });

  test("buf curl over Connect and gRPC-Web on the same port", async () => {
    for (const proto of ["connect", "grpcweb"]) {
      const { stdout } = await run(buf, [
        "curl",
        "--protocol",
        proto,
        "-d",
        '{"shelf":"8"}',
        `${url}/rpctest.v1.LibraryService/GetShelf`,
      ]);
      assert.equal(JSON.parse(stdout).name, "shelf 8", proto);
    }
  });

  const hasGrpcio = existsSync(python);
  for (const version of ["v1", "v1alpha"]) {
    test(`python3-grpcio: health, reflection ${version}, a call and an error`, {
      skip: !hasGrpcio && "no /usr/bin/python3",
    }, async (t) => {
      let out: string;
      try {
        ({ stdout: out } = await run(python, [probe, `127.0.0.1:${port}`, version], { timeout: 30_000 }));
      } catch (e) {
        if (String((e as { stderr?: string }).stderr).includes("No module named 'grpc'")) {
          t.skip("python3-grpcio not installed (apt-get install -y python3-grpcio)");
          return;
        }
        throw e;
      }
      const r = JSON.parse(out);
      assert.equal(r.health, 1);
      assert.ok(r.services.includes("rpctest.v1.LibraryService"));
      assert.ok(r.services.includes("grpc.health.v1.Health"));
      assert.equal(r.files[0], "rpctest/v1/rpctest.proto");
      assert.ok(r.files.includes("google/api/http.proto"));
      assert.equal(r.error_code, 5);
      assert.equal(r.echo, "hi");
      assert.equal(r.fail, "NOT_FOUND");
      assert.equal(r.fail_message, "gone");
      assert.equal(r.has_status_details, true);
    });
  }
});
