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
export { dockerSaveArchive, ociLayout, rawTar, stageRootfs, TEST_IMAGE_PROGRAMS, tarLayer } from "./image-fixtures.ts";
