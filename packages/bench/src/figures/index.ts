import type { Figure } from "../figure.ts";
import { execRoundTrip } from "./exec-round-trip.ts";
import { execThroughput } from "./exec-throughput.ts";
import { grpcJsPeer } from "./grpc-js-peer.ts";
import { sandboxCreate } from "./sandbox-create.ts";
import { verifyToken } from "./verify-token.ts";
import { apiKeyLatency } from "./api-key-latency.ts";
import { loginThroughput } from "./login-throughput.ts";
import { tokenLatency } from "./token-latency.ts";
import { coldStart } from "./cold-start.ts";
import { sseStreams } from "./sse-streams.ts";
import { density } from "./density.ts";
import { agentsLivezLoad } from "./agents-livez-load.ts";
import { pauseResume } from "./pause-resume.ts";
import { egress } from "./egress.ts";
import { sandboxImages } from "./sandbox-images.ts";
import { platformFootprint } from "./platform-footprint.ts";
import { curveFigures } from "../curves/index.ts";

/** In the order of the table. */
export const figures: Figure[] = [
  sandboxCreate,
  execRoundTrip,
  execThroughput,
  verifyToken,
  grpcJsPeer,
  apiKeyLatency,
  tokenLatency,
  sseStreams,
  coldStart,
  loginThroughput,
  density,
  agentsLivezLoad,
  pauseResume,
  egress,
  sandboxImages,
  platformFootprint,
  // How costs grow with the work (src/curves/): after the table's figures.
  ...curveFigures,
];
