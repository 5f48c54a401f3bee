export { orchestratorContract } from "./orchestrator-contract.ts";
export { MemoryOrchestrator } from "../orchestrator/memory/memory-orchestrator.ts";
export { InProcessOrchestrator } from "./in-process-orchestrator.ts";
export { AgentsDouble, type AgentsCall } from "./agents-double.ts";
