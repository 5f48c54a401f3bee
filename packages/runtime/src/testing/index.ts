export { orchestratorContract } from "./orchestrator-contract.ts";
export { MemoryOrchestrator } from "../orchestrator/memory/memory-orchestrator.ts";
