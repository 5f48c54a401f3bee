import type { Figure } from "../figure.ts";
import { execRoundTrip } from "./exec-round-trip.ts";
import { execThroughput } from "./exec-throughput.ts";
import { sandboxCreate } from "./sandbox-create.ts";

/** In the order of the table. */
export const figures: Figure[] = [sandboxCreate, execRoundTrip, execThroughput];
