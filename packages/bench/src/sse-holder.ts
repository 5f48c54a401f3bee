import * as http from "node:http";

/**
 * Idle SSE streams opened from the bench process to an agents service, one
 * HTTP/1.1 connection each, held until `close()`: what the sse-streams
 * figure and the SSE memory curve measure the service holding.
 */
export class SseHolder {
  readonly #base: URL;
  readonly #token: string;
  readonly #agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  readonly #requests: http.ClientRequest[] = [];
  #retries = 0;

  constructor(base: URL, token: string) {
    this.#base = base;
    this.#token = token;
  }

  /** Opens failed with a 503 and tried again. */
  get retries(): number {
    return this.#retries;
  }

  /** Opens one stream; resolves on its first event (established, then held idle); rejects on a status other than 200. */
  open(path: string, method: string, body?: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const req = http.request(
        {
          host: this.#base.hostname,
          port: this.#base.port,
          path,
          method,
          agent: this.#agent,
          headers: {
            authorization: `Bearer ${this.#token}`,
            accept: "text/event-stream",
            ...(body ? { "content-type": "application/json" } : {}),
          },
        },
        (res) => {
          if (res.statusCode !== 200) {
            let text = "";
            res.on("data", (d: Buffer) => (text += d.toString()));
            res.on("end", () => reject(new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 300)}`)));
            return;
          }
          res.once("data", () => resolve());
          res.on("error", () => {});
        },
      );
      req.on("error", reject);
      this.#requests.push(req);
      req.end(body);
    });
  }

  /**
   * `fn` again after a 503 (identity slow to answer the agents' VerifyToken
   * on a loaded machine), as a client would, up to 3 times with backoff.
   */
  async withRetry(fn: () => Promise<void>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (attempt >= 3 || !String(err).includes(": 503")) throw err;
        this.#retries++;
        await new Promise((r) => setTimeout(r, 200 * 2 ** attempt));
      }
    }
  }

  /**
   * The run's own stream, which keeps a session of the `bench/idle` model
   * running (its run waits forever): POST …/messages with one message.
   */
  openIdleRun(sessionId: string): Promise<void> {
    return this.open(
      `/v1/sessions/${sessionId}/messages`,
      "POST",
      JSON.stringify({ messages: [{ role: "user", content: "wait" }] }),
    );
  }

  /**
   * Opens followers of a session (GET …/events), `inFlight` at a time, each
   * replaced as soon as it is established (not batch by batch, where every
   * batch waits for its slowest), while `more(started)` allows one more
   * (`started`: the opens this call began so far); `established` is told of
   * each one established.
   */
  async follow(
    sessionId: string,
    inFlight: number,
    more: (started: number) => boolean,
    established: () => void,
  ): Promise<void> {
    let started = 0;
    const opener = async () => {
      while (more(started)) {
        started++;
        await this.withRetry(() => this.open(`/v1/sessions/${sessionId}/events`, "GET"));
        established();
      }
    };
    await Promise.all(Array.from({ length: inFlight }, opener));
  }

  /** Ends the streams opened so far (they stay countable for new opens). */
  dropAll(): void {
    for (const req of this.#requests.splice(0)) req.destroy();
  }

  close(): void {
    this.dropAll();
    this.#agent.destroy();
  }

  /** Closes the streams, then cancels the session's run (best effort). */
  async closeAndCancel(sessionId: string): Promise<void> {
    this.close();
    await fetch(new URL(`/v1/sessions/${sessionId}/cancel`, this.#base), {
      method: "POST",
      headers: { authorization: `Bearer ${this.#token}`, "content-type": "application/json" },
      body: "{}",
    }).catch(() => {});
  }
}
