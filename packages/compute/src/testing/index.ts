export {
  type CollectedExec,
  type ContractDriverOptions,
  type ContractFactoryResult,
  collectExec,
  contractSpec,
  type DriverFactory,
  driverContract,
} from "./driver-contract.ts";
export { dockerSaveArchive, ociLayout, rawTar, stageRootfs, TEST_IMAGE_PROGRAMS, tarLayer } from "./image-fixtures.ts";
export { createIsolatedNetns, createNetworkWorld, type NetworkWorld } from "./network-world.ts";
export { firstLine } from "./first-line.ts";
export { until } from "./until.ts";
