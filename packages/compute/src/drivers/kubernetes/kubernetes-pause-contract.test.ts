// test-timeout: 300000
// The driver contract's pause cases (issue 18) on the Kubernetes driver,
// against the API-server double: pause deletes the pod and keeps the
// session's PVC, resume makes a new pod on it. Beside
// kubernetes-contract.test.ts, which runs the core cases (~40 s here at
// load ~8, 16 s of it the max-runtime case).
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
  "pause",
);
