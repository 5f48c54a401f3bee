import { createRegistry, type DescFile, type MessageInitShape, type Registry, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type * as v1 from "@platform/gen/grpc/reflection/v1/reflection_pb";
import type * as v1alpha from "@platform/gen/grpc/reflection/v1alpha/reflection_pb";

type Request = v1.ServerReflectionRequest | v1alpha.ServerReflectionRequest;
type ResponseInit = MessageInitShape<typeof v1.ServerReflectionResponseSchema>;

// gRPC status codes used in ErrorResponse.
const NOT_FOUND = 5;
const UNIMPLEMENTED = 12;

/** Answers reflection requests from the descriptors of the served files. */
export class Reflector {
  private readonly registry: Registry;
  private readonly files = new Map<string, DescFile>();

  constructor(
    files: DescFile[],
    private readonly serviceNames: string[],
  ) {
    const all = closure(files);
    this.registry = createRegistry(...all);
    for (const f of all) this.files.set(f.name, f);
  }

  private fileBytes(root: DescFile): Uint8Array[] {
    // The requested file first, then its transitive imports.
    return closure([root]).map((f) => toBinary(FileDescriptorProtoSchema, f.proto));
  }

  private fileOfSymbol(symbol: string): DescFile | undefined {
    const r = this.registry;
    const direct = r.get(symbol);
    if (direct && "file" in direct) return direct.file;
    // A method or a field: look up the parent.
    const dot = symbol.lastIndexOf(".");
    if (dot > 0) {
      const parent = r.get(symbol.slice(0, dot));
      if (parent && "file" in parent) return parent.file;
    }
    // An enum value, scoped like its enum's siblings (pkg.VALUE).
    for (const d of r) {
      if (d.kind !== "enum") continue;
      const scope = d.typeName.slice(0, d.typeName.lastIndexOf(".") + 1);
      if (d.values.some((v) => scope + v.name === symbol)) return d.file;
    }
    return undefined;
  }

  respond(req: Request): ResponseInit {
    // A plain init, so a v1alpha request can be echoed in either version.
    const base = {
      validHost: req.host,
      originalRequest: { host: req.host, messageRequest: req.messageRequest } as ResponseInit["originalRequest"],
    };
    const notFound = (msg: string): ResponseInit => ({
      ...base,
      messageResponse: { case: "errorResponse", value: { errorCode: NOT_FOUND, errorMessage: msg } },
    });
    const files = (f: DescFile | undefined, what: string): ResponseInit =>
      f
        ? {
            ...base,
            messageResponse: {
              case: "fileDescriptorResponse",
              value: { fileDescriptorProto: this.fileBytes(f) },
            },
          }
        : notFound(`${what} not found`);
    const m = req.messageRequest;
    switch (m.case) {
      case "listServices":
        return {
          ...base,
          messageResponse: {
            case: "listServicesResponse",
            value: { service: this.serviceNames.map((name) => ({ name })) },
          },
        };
      case "fileByFilename":
        return files(this.files.get(m.value), `file ${m.value}`);
      case "fileContainingSymbol":
        return files(this.fileOfSymbol(m.value), `symbol ${m.value}`);
      case "fileContainingExtension": {
        for (const d of this.registry) {
          if (
            d.kind === "extension" &&
            d.extendee.typeName === m.value.containingType &&
            d.number === m.value.extensionNumber
          )
            return files(d.file, "extension");
        }
        return notFound(`extension ${m.value.containingType}(${m.value.extensionNumber}) not found`);
      }
      case "allExtensionNumbersOfType": {
        if (!this.registry.getMessage(m.value)) return notFound(`type ${m.value} not found`);
        const numbers: number[] = [];
        for (const d of this.registry)
          if (d.kind === "extension" && d.extendee.typeName === m.value) numbers.push(d.number);
        return {
          ...base,
          messageResponse: {
            case: "allExtensionNumbersResponse",
            value: { baseTypeName: m.value, extensionNumber: numbers },
          },
        };
      }
      default:
        return {
          ...base,
          messageResponse: {
            case: "errorResponse",
            value: { errorCode: UNIMPLEMENTED, errorMessage: "unsupported reflection request" },
          },
        };
    }
  }
}

/** The files and everything they import, each once, dependencies after dependents. */
function closure(roots: DescFile[]): DescFile[] {
  const seen = new Set<string>();
  const out: DescFile[] = [];
  const visit = (f: DescFile) => {
    if (seen.has(f.name)) return;
    seen.add(f.name);
    out.push(f);
    for (const d of f.dependencies) visit(d);
  };
  for (const r of roots) visit(r);
  return out;
}

/** gRPC server reflection (v1) over the served descriptors, for grpcurl and buf curl. */
export function reflectionV1(r: Reflector): ServiceImpl<typeof v1.ServerReflection> {
  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield r.respond(req);
    },
  };
}

/** gRPC server reflection (v1alpha), for clients that know only the older name. */
export function reflectionV1alpha(r: Reflector): ServiceImpl<typeof v1alpha.ServerReflection> {
  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests)
        yield r.respond(req) as MessageInitShape<typeof v1alpha.ServerReflectionResponseSchema>;
    },
  };
}
