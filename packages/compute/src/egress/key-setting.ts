import * as fs from "node:fs";
import { ConfigError, custom, raw } from "@platform/config";

/**
 * A file holding the key of the sandboxes' proxy credentials (a mounted
 * Secret): at least 32 bytes, read once at start.
 */
export function proxyKeyFile<R extends boolean>(name: string, required: R) {
  return custom<R extends true ? Buffer : Buffer | undefined>(name, {
    shown: required ? "required" : "unset",
    doc: required
      ? "file holding the key (at least 32 bytes) that compute signs each sandbox's proxy credential with; the same Secret as compute's `COMPUTE_EGRESS_PROXY_KEY_FILE`"
      : "kubernetes driver: file holding the key (at least 32 bytes) of the sandboxes' egress-proxy credentials, shared with the egress proxy (`EGRESS_PROXY_KEY_FILE`); unset: no sandbox network (a policy is FAILED_PRECONDITION)",
    read: (env) => {
      const path = raw(env, name);
      if (path === undefined) {
        if (required) throw new ConfigError(name, `${name} is required`);
        return undefined as never;
      }
      let key: Buffer;
      try {
        key = fs.readFileSync(path);
      } catch (err) {
        throw new ConfigError(name, `${name}: cannot read ${path}: ${(err as Error).message}`);
      }
      if (key.length < 32) throw new ConfigError(name, `${name}: the key in ${path} is shorter than 32 bytes`);
      return key as never;
    },
  });
}
