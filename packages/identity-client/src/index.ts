export { IdentityClient, type Verified } from "./identity-client.ts";
