export { IdentityClient, type Verified } from "./identity-client.ts";
export { type WebhookEventOut, WebhookPublisher } from "./webhook-publisher.ts";
