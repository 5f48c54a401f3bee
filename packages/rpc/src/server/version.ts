// A JSON import, not a read relative to import.meta.url: the tenant worker runs
// from a CommonJS bundle, where import.meta.url is empty; esbuild inlines this.
import rpcPackage from "../../package.json" with { type: "json" };

/**
 * The platform's version, reported by every service's health endpoints
 * (`platform status` shows it). The workspace's packages are released
 * together under one version; this package's is it.
 */
export const PLATFORM_VERSION: string = rpcPackage.version;
