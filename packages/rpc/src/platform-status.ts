import { ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";
import { errorDomain } from "./errors.ts";

/**
 * Whether an error is a status a platform service answered with (a
 * ConnectError carrying our ErrorInfo): its message was written by platform
 * code for callers. Anything else (a client's transport failure, a
 * JavaScript exception wrapped by Connect) has a message that may hold
 * addresses, driver text or values, and is not relayed.
 */
export function isPlatformStatus(err: unknown): err is ConnectError {
  return err instanceof ConnectError && err.findDetails(ErrorInfoSchema).some((d) => d.domain === errorDomain);
}
