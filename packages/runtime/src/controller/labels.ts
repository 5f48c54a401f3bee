/** Keys of the spec's tenant-deployment table (section "Runtime resources"). */
export const Annotation = {
  tenantShort: "runtime.platform.io/tenant-short",
  tenantId: "runtime.platform.io/tenant-id",
  orgId: "runtime.platform.io/org-id",
  lastSeenAt: "runtime.platform.io/last-seen-at",
  /**
   * Not in the spec's table: when IdleSweep scaled the deployment to zero, so
   * WeeklySweep can measure "at replicas 0 for 7 days". Falls back to
   * last-seen-at when absent.
   */
  scaledDownAt: "runtime.platform.io/scaled-down-at",
} as const;

export const Label = {
  tenant: "runtime.platform.io/tenant",
  managedBy: "app.kubernetes.io/managed-by",
} as const;

export const MANAGED_BY = "runtime-controller";

/** The selector of the sweeps: every tenant deployment of this controller. */
export const TENANT_SELECTOR: Record<string, string> = { [Label.tenant]: "true", [Label.managedBy]: MANAGED_BY };
