import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ApiKeyItem } from "../api-keys/api-keys.ts";

/** An API key list item as UserService and OrgAPIKeyService answer it. */
export const apiKeyMessage = (k: ApiKeyItem) => ({
  id: k.id,
  name: k.name,
  keyPrefix: k.keyPrefix,
  env: k.env,
  expiresAt: k.expiresAt ? timestampFromDate(k.expiresAt) : undefined,
  lastUsedAt: k.lastUsedAt ? timestampFromDate(k.lastUsedAt) : undefined,
  scopes: k.scopes,
  org: k.org,
  createdBy: k.createdBy ?? "",
});
