import { Code, PlatformError } from "@platform/errors";

/**
 * POSTs a JSON body to a provider and returns the response once its headers
 * arrived with a 2xx status. Anything else (refused connection, DNS, 5xx,
 * rejected credentials) is `unavailable`: the provider cannot serve this
 * call, and the caller answers 503 before any stream starts.
 */
export async function postForStream(
  provider: string,
  url: string,
  headers: Record<string, string>,
  body: unknown,
  signal: AbortSignal,
): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", ...headers },
      body: JSON.stringify(body),
      signal,
    });
  } catch (err) {
    throw new PlatformError(
      Code.Unavailable,
      "unavailable",
      `model provider ${provider} is unreachable`,
      {},
      { cause: err },
    );
  }
  if (!response.ok || !response.body) {
    const detail = await response.text().catch(() => "");
    throw PlatformError.unavailable(`model provider ${provider} answered HTTP ${response.status}${summary(detail)}`);
  }
  return response;
}

/** The provider's own error message, if its body has one, shortened. */
function summary(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string } | string; message?: string };
    const message = typeof parsed.error === "string" ? parsed.error : (parsed.error?.message ?? parsed.message);
    if (message) return `: ${String(message).slice(0, 300)}`;
  } catch {
    // not JSON
  }
  return "";
}
