// Apart from jwt-service.ts, so the settings (and `identity --settings`) load without jose.
/** IssueJWT clamps any requested lifetime to this. */
export const MAX_TTL_SECONDS = 24 * 3600;
