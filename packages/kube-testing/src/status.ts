// Status objects in the shape the API server returns for failed requests
// (apimachinery metav1.Status), so client code sees the same code/reason pairs.
export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: Array<{ reason?: string; message?: string; field?: string }>;
}

export interface KubeStatus {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Success" | "Failure";
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/** A request failure carrying the Status body and HTTP code to send. */
export class StatusError extends Error {
  constructor(readonly status: KubeStatus) {
    super(status.message ?? status.reason ?? "failure");
  }
  get code(): number {
    return this.status.code;
  }
}

function failure(code: number, reason: string, message: string, details?: StatusDetails): StatusError {
  return new StatusError({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    details,
    code,
  });
}

/** `group` is "" for the core group; the API prints `pods "x"` or `deployments.apps "x"`. */
function qualified(resource: string, group: string): string {
  return group ? `${resource}.${group}` : resource;
}

export const statusErrors = {
  notFound: (resource: string, group: string, name: string) =>
    failure(404, "NotFound", `${qualified(resource, group)} "${name}" not found`, {
      name,
      group: group || undefined,
      kind: resource,
    }),
  alreadyExists: (resource: string, group: string, name: string) =>
    failure(409, "AlreadyExists", `${qualified(resource, group)} "${name}" already exists`, {
      name,
      group: group || undefined,
      kind: resource,
    }),
  conflict: (resource: string, group: string, name: string) =>
    failure(
      409,
      "Conflict",
      `Operation cannot be fulfilled on ${qualified(resource, group)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      { name, group: group || undefined, kind: resource },
    ),
  invalid: (kind: string, group: string, name: string, causes: Array<{ field: string; message: string }>) =>
    failure(
      422,
      "Invalid",
      `${kind}${group ? `.${group}` : ""} "${name}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(", ")}`,
      { name, group: group || undefined, kind, causes: causes.map((c) => ({ reason: "FieldValueInvalid", ...c })) },
    ),
  badRequest: (message: string) => failure(400, "BadRequest", message),
  methodNotAllowed: (message = "the server does not allow this method on the requested resource") =>
    failure(405, "MethodNotAllowed", message),
  unsupportedMediaType: (contentType: string) =>
    failure(
      415,
      "UnsupportedMediaType",
      `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json; got ${contentType}`,
    ),
  internal: (message: string) => failure(500, "InternalError", message),
};

/** The Status object the API server answers a successful delete with. */
export function successStatus(details?: StatusDetails): KubeStatus {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details, code: 200 };
}
