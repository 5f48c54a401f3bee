import { IdentityRestCode, PlatformError } from "@platform/errors";

const MAX_URL = 2048;

/**
 * An endpoint URL: absolute http(s), no credentials in it, at most 2048
 * characters. Whether its host is public is decided at each delivery (a name
 * can resolve elsewhere later), not here.
 */
export function webhookUrl(value: string): string {
  const bad = (why: string) =>
    PlatformError.invalidArgument(`url ${why}`, IdentityRestCode.invalidRequest, { field: "url" });
  const text = value.trim();
  if (text === "") throw bad("is required");
  if (text.length > MAX_URL) throw bad(`must be at most ${MAX_URL} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw bad("must be an absolute http or https URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw bad("must be an absolute http or https URL");
  if (url.username || url.password) throw bad("must not hold credentials");
  if (url.hash) throw bad("must not hold a fragment");
  return url.toString();
}
