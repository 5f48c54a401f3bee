// pods/exec over WebSocket with the Kubernetes channel protocol
// (v4.channel.k8s.io and v5.channel.k8s.io): every binary frame starts with a
// channel byte (0 stdin, 1 stdout, 2 stderr, 3 status, 4 resize); the status
// channel carries one metav1.Status, with the exit code of a non-zero exit in
// details.causes[reason=ExitCode]; v5 adds the close frame (255, channel) the
// client sends to half-close stdin. As on a real node, a client that hangs up
// does not kill the process it started.
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer } from "ws";
import type { KubeDouble } from "./double.ts";
import { execInPod } from "./pod-runtime.ts";
import type { KubeObject } from "./resources.ts";
import { type KubeStatus, StatusError, statusErrors } from "./status.ts";

const SUPPORTED = ["v5.channel.k8s.io", "v4.channel.k8s.io"];
const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
const STATUS = 3;
const CLOSE = 255;

export interface ExecSession {
  abort(): void;
}

const wss = new WebSocketServer({
  noServer: true,
  handleProtocols: (offered) => SUPPORTED.find((p) => offered.has(p)) ?? false,
});

function reject(socket: Duplex, err: StatusError): void {
  const body = JSON.stringify(err.status);
  const text =
    { 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 500: "Internal Server Error" }[err.code] ?? "Error";
  socket.end(
    `HTTP/1.1 ${err.code} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function exitStatus(code: number, command: string[]): Partial<KubeStatus> {
  // The kubelet's status frames carry no HTTP code.
  if (code === 0) return { metadata: {}, status: "Success" };
  return {
    metadata: {},
    status: "Failure",
    message: `command terminated with non-zero exit code: error executing command [${command.join(" ")}], exit code ${code}`,
    reason: "NonZeroExitCode",
    details: { causes: [{ reason: "ExitCode", message: String(code) }] },
  };
}

function frame(channel: number, data: Buffer): Buffer {
  return Buffer.concat([Buffer.from([channel]), data]);
}

/** Serves pods/exec over WebSocket (the v5 channel protocol) into a pod the double runs. */
export function handleExecUpgrade(double: KubeDouble, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  start(double, req, socket, head).catch((err) => {
    reject(socket, err instanceof StatusError ? err : statusErrors.internal(String(err)));
  });
}

async function start(double: KubeDouble, req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
  const url = new URL(req.url ?? "/", "http://double");
  double.requests.push({ method: "CONNECT", path: url.pathname + url.search, contentType: undefined });
  const target = double.parsePath(url.pathname);
  if (target?.def.plural !== "pods" || target.subresource !== "exec" || !target.name || !target.namespace) {
    throw new StatusError({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "the server could not find the requested resource",
      reason: "NotFound",
      code: 404,
    });
  }
  const offered = String(req.headers["sec-websocket-protocol"] ?? "")
    .split(",")
    .map((s) => s.trim());
  if (!offered.some((p) => SUPPORTED.includes(p)))
    throw statusErrors.badRequest(
      `no supported subprotocol in ${JSON.stringify(offered)}; this double speaks ${SUPPORTED.join(", ")}`,
    );
  const q = url.searchParams;
  const command = q.getAll("command");
  const flag = (n: string) => q.get(n) === "true" || q.get(n) === "1";
  if (command.length === 0) throw statusErrors.badRequest("you must specify at least one command for the container");
  if (!flag("stdin") && !flag("stdout") && !flag("stderr"))
    throw statusErrors.badRequest("you must specify at least 1 of stdin, stdout, stderr");
  if (flag("tty")) throw statusErrors.badRequest("tty is not supported by the kube-testing double");
  const pod = double.get("pods", target.namespace, target.name);
  if (!pod) throw statusErrors.notFound("pods", "", target.name);
  const containers: KubeObject[] = pod.spec.containers ?? [];
  const containerName = q.get("container") ?? (containers.length === 1 ? containers[0].name : undefined);
  if (!containerName)
    throw statusErrors.badRequest(
      `a container name must be specified for pod ${target.name}, choose one of: [${containers.map((c) => c.name).join(" ")}]`,
    );
  const container = containers.find((c) => c.name === containerName);
  if (!container) throw statusErrors.badRequest(`container ${containerName} is not valid for pod ${target.name}`);
  const phase = pod.status?.phase;
  if (phase === "Succeeded" || phase === "Failed")
    throw statusErrors.badRequest(`cannot exec into a container in a completed pod; current phase is ${phase}`);
  const running = (pod.status?.containerStatuses ?? []).find((s: KubeObject) => s.name === containerName)?.state
    ?.running;
  if (phase !== "Running" || !running)
    throw statusErrors.badRequest(`container ${containerName} is not running in pod ${target.name}`);
  const sandbox = await double.podSandbox(target.namespace, target.name);
  if (!sandbox)
    throw statusErrors.internal(`pod ${target.name} has no running container in the double (runContainers is off)`);

  const env: Record<string, string> = {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    HOSTNAME: target.name,
    HOME: "/root",
  };
  for (const e of container.env ?? []) if (typeof e.value === "string") env[e.name] = e.value;

  wss.handleUpgrade(req, socket, head, (ws) => {
    const v5 = ws.protocol === "v5.channel.k8s.io";
    const child = execInPod(sandbox, container.workingDir ?? "/", env, command);
    let open = true;
    const untrack = double.trackExec({
      abort: () => {
        child.kill("SIGKILL");
        ws.terminate();
      },
    });
    const send = (channel: number, data: Buffer) => {
      if (open && ws.readyState === ws.OPEN) ws.send(frame(channel, data));
    };
    if (flag("stdout")) child.stdout?.on("data", (d: Buffer) => send(STDOUT, d));
    else child.stdout?.resume();
    if (flag("stderr")) child.stderr?.on("data", (d: Buffer) => send(STDERR, d));
    else child.stderr?.resume();
    if (!flag("stdin")) child.stdin?.end();
    child.stdin?.on("error", () => {});
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      if (!isBinary || data.length === 0) return;
      const channel = data[0];
      if (channel === STDIN && flag("stdin")) child.stdin?.write(data.subarray(1));
      else if (v5 && channel === CLOSE && data[1] === STDIN) child.stdin?.end();
    });
    ws.on("close", () => {
      open = false;
      // The connection is gone: stdin sees EOF, the process itself keeps running.
      child.stdin?.end();
    });
    child.on("close", (code, signal) => {
      const exit =
        code ??
        (signal ? 128 + ({ SIGKILL: 9, SIGTERM: 15, SIGINT: 2, SIGHUP: 1 } as Record<string, number>)[signal] : 1);
      send(STATUS, Buffer.from(JSON.stringify(exitStatus(exit, command))));
      untrack();
      if (ws.readyState === ws.OPEN) ws.close(1000);
    });
  });
}
