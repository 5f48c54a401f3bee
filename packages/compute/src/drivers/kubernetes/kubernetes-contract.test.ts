// test-timeout: 480000
// The driver contract's core cases on the Kubernetes driver, against the
// API-server double. A file of its own: with the session workspace cases it
// is most of a 180 s file budget on a loaded machine (139 s at load 35, and
// ~280 s at load 44), hence the longer timeout; the pause cases run beside it
// in kubernetes-pause-contract.test.ts.
import { KubeDouble } from "@platform/kube-testing";
import { driverContract } from "../../testing/driver-contract.ts";
import { KubernetesDriver } from "./kubernetes-driver.ts";

const NS = "sandboxes";

driverContract(
  "kubernetes (API-server double)",
  async (o) => {
    const double = await KubeDouble.start({ namespaces: [NS] });
    const driver = new KubernetesDriver({
      kubeConfig: double.kubeConfig(NS),
      namespace: NS,
      killGraceMs: o.killGraceMs,
      pollIntervalMs: 50,
      defaultSize: "1Gi",
    });
    return { driver, image: "debian:bookworm-slim", cleanup: () => double.close() };
  },
  "core",
);
