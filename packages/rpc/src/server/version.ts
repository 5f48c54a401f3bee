import { readFileSync } from "node:fs";

/**
 * The platform's version, reported by every service's health endpoints
 * (`platform status` shows it). The workspace's packages are released
 * together under one version; this package's is it.
 */
export const PLATFORM_VERSION: string = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string })
  .version;
