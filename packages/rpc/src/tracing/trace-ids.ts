import { RandomIdGenerator } from "@opentelemetry/sdk-trace-base";
import { takePreferredTraceId } from "./preferred-id.ts";

/** The SDK's random ids, except a trace id preferred by withPreferredTraceId (./preferred-id.ts). */
export class PreferredTraceIds extends RandomIdGenerator {
  readonly #random = new RandomIdGenerator();
  override generateTraceId = (): string => takePreferredTraceId() ?? this.#random.generateTraceId();
}
