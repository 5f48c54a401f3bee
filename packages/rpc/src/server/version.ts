/**
 * The platform's version, reported by every service's health endpoints
 * (`platform status` shows it). The workspace's packages are released
 * together under one version, @platform/rpc's package.json version, which
 * health.test.ts holds this constant to. A constant, not a read of
 * package.json: the tenant worker runs as one bundled script, where no
 * package.json sits beside the code.
 */
export const PLATFORM_VERSION = "0.1.0";
