import type { DescService } from "@bufbuild/protobuf";
import { AgentService, SessionService as AgentsSessionService } from "@platform/gen/agents/v1/agents_pb";
import { ScheduleService } from "@platform/gen/agents/v1/schedules_pb";
import { UsageService } from "@platform/gen/agents/v1/usage_pb";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { OrgService, SessionService, UserService } from "@platform/gen/identity/v1/rest_pb";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";

/** The v1 services of each platform service, as generated from proto/. */
export const contractServices = {
  compute: [ComputeService],
  identity: [AuthService, SessionService, UserService, OrgService],
  agents: [AgentService, AgentsSessionService, UsageService, ScheduleService],
  runtime: [RuntimeService],
} as const satisfies Record<string, readonly DescService[]>;
