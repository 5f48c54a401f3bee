import { orchestratorContract } from "../../testing/orchestrator-contract.ts";
import { MemoryOrchestrator } from "./memory-orchestrator.ts";

orchestratorContract("memory", () => new MemoryOrchestrator());
