export {
  collectExec,
  contractSpec,
  driverContract,
  type CollectedExec,
  type ContractDriverOptions,
  type ContractFactoryResult,
  type DriverFactory,
} from "./driver-contract.ts";
export { createIsolatedNetns, createNetworkWorld, type NetworkWorld } from "./network-world.ts";
