import {
  type Code as ConnectCode,
  ConnectError,
  type Interceptor,
  createClient,
  createRouterTransport,
} from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import { PlatformError } from "@platform/errors";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { OrgService, SessionService, UserService } from "@platform/gen/identity/v1/rest_pb";
import type { Identity } from "../identity.ts";
import { identityInterceptors } from "../server/interceptors.ts";
import { authService, orgService, sessionService, userService } from "../server/handlers.ts";

// What the rpc package's server does to a thrown PlatformError, so in-process
// tests see the reason as a client would.
const errorsAsErrorInfo: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    const p = PlatformError.from(err);
    const metadata: Record<string, string> = { ...p.extra };
    if (p.httpStatus !== undefined) metadata.http_status = String(p.httpStatus);
    throw new ConnectError(p.message, p.code as number as ConnectCode, undefined, [
      { desc: ErrorInfoSchema, value: { reason: p.reason, domain: "platform", metadata } },
    ]);
  }
};

/** Reason and metadata of a failed call. */
export function errorInfo(err: unknown): { code: ConnectCode; reason: string; metadata: Record<string, string> } {
  const ce = ConnectError.from(err);
  const info = ce.findDetails(ErrorInfoSchema)[0];
  return { code: ce.code, reason: info?.reason ?? "", metadata: { ...(info?.metadata ?? {}) } };
}

/** In-process clients of all four services, through the same interceptors as the server. */
export function routerClients(identity: Identity, extra: { interceptors?: Interceptor[] } = {}) {
  const transport = createRouterTransport(
    (router) => {
      router.service(SessionService, sessionService(identity));
      router.service(UserService, userService(identity));
      router.service(OrgService, orgService(identity));
      router.service(AuthService, authService(identity));
    },
    { router: { interceptors: [errorsAsErrorInfo, ...identityInterceptors(identity), ...(extra.interceptors ?? [])] } },
  );
  const client = <S extends DescService>(s: S) => createClient(s, transport);
  return {
    sessions: client(SessionService),
    users: client(UserService),
    orgs: client(OrgService),
    auth: client(AuthService),
  };
}
