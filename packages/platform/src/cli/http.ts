import { randomUUID } from "node:crypto";
import { type Credentials, loadCredentials, saveCredentials } from "./credentials.ts";
import { CliError, type Endpoints } from "./endpoints.ts";

/** An error answer of a service, rendered for a human. */
export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

type RequestOptions = {
  body?: unknown;
  auth?: boolean;
  idempotent?: boolean;
  headers?: Record<string, string>;
  signal?: AbortSignal;
};

/**
 * HTTP client of the platform's REST surfaces. It sends the stored access
 * token (or PLATFORM_API_KEY), refreshes it once on 401 with the stored
 * refresh token, and turns both error envelopes (identity's `{code}` and
 * agents' `{error: {code}}`) into ApiError.
 */
export class PlatformClient {
  constructor(
    readonly endpoints: Endpoints,
    readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  get credentials(): Credentials | undefined {
    return loadCredentials(this.endpoints.identity, this.env);
  }

  bearer(): string {
    const key = this.env.PLATFORM_API_KEY;
    if (key) return key;
    const creds = this.credentials;
    if (!creds) throw new CliError("not logged in: run `platform login --email <email>` first", "not_logged_in");
    return creds.accessToken;
  }

  async request<T>(method: string, url: string, options: RequestOptions = {}): Promise<T> {
    const res = await this.send(method, url, options);
    if (res.status === 204) return undefined as T;
    return (await res.json()) as T;
  }

  /** Sends a request and returns the raw response (for streams); errors are thrown. */
  async send(method: string, url: string, options: RequestOptions = {}): Promise<Response> {
    const attempt = async () => {
      const headers: Record<string, string> = { ...options.headers };
      if (options.body !== undefined) headers["content-type"] = "application/json";
      if (options.auth !== false) headers.authorization = `Bearer ${this.bearer()}`;
      if (options.idempotent) headers["idempotency-key"] = randomUUID();
      try {
        return await fetch(url, {
          method,
          headers,
          body: options.body === undefined ? undefined : JSON.stringify(options.body),
          signal: options.signal,
        });
      } catch (err) {
        if (options.signal?.aborted) throw err;
        throw new ApiError(
          0,
          "unreachable",
          `cannot reach ${new URL(url).origin}: ${(err as Error).cause ?? (err as Error).message}`,
        );
      }
    };
    let res = await attempt();
    if (res.status === 401 && options.auth !== false && !this.env.PLATFORM_API_KEY && (await this.refresh())) {
      res = await attempt();
    }
    if (!res.ok) throw await toApiError(res);
    return res;
  }

  /** Exchanges the stored refresh token for a new pair; false when it cannot. */
  async refresh(): Promise<boolean> {
    const creds = this.credentials;
    if (!creds) return false;
    const res = await fetch(`${this.endpoints.identity}/v1/auth/refresh`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ refresh_token: creds.refreshToken }),
    }).catch(() => undefined);
    if (!res?.ok) return false;
    const pair = (await res.json()) as { access_token: string; refresh_token: string };
    saveCredentials(
      this.endpoints.identity,
      { email: creds.email, accessToken: pair.access_token, refreshToken: pair.refresh_token },
      this.env,
    );
    return true;
  }
}

async function toApiError(res: Response): Promise<ApiError> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as { code?: string; message?: string; error?: { code?: string; message?: string } };
    const code = body.error?.code ?? body.code ?? `http_${res.status}`;
    const message = body.error?.message ?? body.message ?? res.statusText;
    return new ApiError(res.status, code, message);
  } catch {
    return new ApiError(res.status, `http_${res.status}`, text.slice(0, 200) || res.statusText);
  }
}
