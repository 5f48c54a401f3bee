import { type DescMethod, getOption, hasOption } from "@bufbuild/protobuf";
import { max_request_bytes } from "@platform/gen/platform/api/v1/options_pb";

/**
 * The largest request `method` takes: its `(platform.api.v1.max_request_bytes)`
 * where the contract raises it above the server's body limit (the RPCs that
 * carry file data), else the server's limit. A contract can only raise the
 * limit of its own RPCs, never lower another's.
 */
export function requestLimitOf(method: DescMethod, serverLimit: number): number {
  if (!hasOption(method, max_request_bytes)) return serverLimit;
  return Math.max(serverLimit, getOption(method, max_request_bytes));
}
