// Test helpers for this package and for others that embed the agents
// service (identity's double is @platform/identity-client/testing): a double of compute over real gRPC, a scripted model,
// the provider contract suite and a provider wire-format replay server.
export { ComputeDouble, EXEC_CPU_MS, EXEC_WALL_MS } from "./compute-double.ts";
export { ScriptedModel, gate, type Script, type Step } from "./scripted-model.ts";
export { ReplayServer, deadUrl, named, dataOnly } from "./replay-server.ts";
export { startHarness, collect, type Harness } from "./harness.ts";
export { modelProviderContract, baseRequest, type ArrangeScenario, type Scenario } from "../providers/contract.ts";
