import { open, seal } from "@platform/credentials";
import { PlatformError } from "@platform/errors";
import type { HeaderSealer } from "../../domain/mcp-servers.ts";

/**
 * Seals and opens an MCP server's header values (AES-256-GCM under
 * AGENTS_SECRETS_KEY; output base64 of iv | tag | ciphertext). The
 * additional data names the org and the server, so a sealed value copied
 * onto another org's or another server's row does not open.
 */
export class HeaderSecrets implements HeaderSealer {
  constructor(private readonly key: Buffer | undefined) {
    if (key && key.length !== 32) throw new Error("AGENTS_SECRETS_KEY must be 32 bytes");
  }

  get enabled(): boolean {
    return this.key !== undefined;
  }

  seal(headers: Readonly<Record<string, string>>, aad: string): string {
    if (!this.key)
      throw PlatformError.failedPrecondition(
        "MCP server headers are stored encrypted and this service has no AGENTS_SECRETS_KEY: set it, or give the server no headers",
      );
    return seal(this.key, Buffer.from(JSON.stringify(headers), "utf8"), aad).toString("base64");
  }

  /** The headers, or an error naming why they cannot be read (never their values). */
  open(sealed: string, aad: string): Record<string, string> {
    if (!this.key)
      throw PlatformError.failedPrecondition("the server's headers need AGENTS_SECRETS_KEY, which is not set");
    try {
      return JSON.parse(open(this.key, Buffer.from(sealed, "base64"), aad).toString("utf8")) as Record<string, string>;
    } catch {
      throw PlatformError.failedPrecondition(
        "the server's stored headers do not open with this AGENTS_SECRETS_KEY (was the key changed?)",
      );
    }
  }
}
