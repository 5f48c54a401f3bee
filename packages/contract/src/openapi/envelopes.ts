import { Code, codeName, EdgeCode, ErrorAction, IdentityRestCode } from "@platform/errors";
import type { Schema } from "./json-schema.ts";

/** How a service writes its REST errors (rpc's envelopes). */
export type EnvelopeKind = "reason" | "code-name";

/** The component name of a service's error body. */
export const ERROR_SCHEMA = "Error";

/**
 * Identity's `{"code": "<reason>", "message": ..., ...extra}` (rpc's
 * reasonEnvelope): `code` is the reason itself, so the list is open (the
 * known ones are named); some errors add fields (`action` on a reused
 * refresh token).
 */
function reasonEnvelope(): Schema {
  return {
    type: "object",
    title: "identity error",
    required: ["code", "message"],
    properties: {
      code: {
        type: "string",
        description: `The reason, e.g. ${Object.values(IdentityRestCode)
          .map((c) => `\`${c}\``)
          .join(", ")}.`,
        examples: [IdentityRestCode.invalidRequest, IdentityRestCode.unauthenticated],
      },
      message: { type: "string", description: "Human-readable; not to be parsed." },
      action: {
        type: "string",
        enum: Object.values(ErrorAction),
        description: "What the client must do next (refresh_token_reused: re_authenticate).",
      },
    },
    additionalProperties: true,
  };
}

/** Every `error.code` the code-name envelope writes: the Connect code names and the HTTP faults. */
function codeNames(): string[] {
  const names = new Set<string>();
  for (const v of Object.values(Code)) if (typeof v === "number" && v !== Code.Unknown) names.add(codeName(v));
  for (const v of Object.values(EdgeCode)) names.add(v);
  return [...names];
}

/** Agents' and the router's `{"error": {"code": "<connect code name>", "message": ..., "reason"?}}`. */
function codeNameEnvelope(): Schema {
  return {
    type: "object",
    title: "error envelope",
    required: ["error"],
    additionalProperties: false,
    properties: {
      error: {
        type: "object",
        required: ["code", "message"],
        additionalProperties: false,
        properties: {
          code: { type: "string", enum: codeNames() },
          message: { type: "string", description: "Human-readable; not to be parsed." },
          reason: {
            type: "string",
            description: "A reason callers act on, beside the code (an API key's missing scope).",
            enum: [IdentityRestCode.insufficientScope],
          },
        },
      },
    },
  };
}

/** The JSON Schema of a service's error body: identity's reason envelope (`code` is the reason) or the others' code-name envelope. */
export function envelopeSchema(kind: EnvelopeKind): Schema {
  return kind === "reason" ? reasonEnvelope() : codeNameEnvelope();
}
