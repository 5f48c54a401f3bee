import { ChannelListener } from "@platform/db";
import type { AuthCaches } from "./auth-caches.ts";

/** The channel migration 0002's triggers notify on every change of a membership, an API key or a signing key. */
export const AUTH_CHANNEL = "identity_auth";

/**
 * Keeps the caches coherent with writes made by other replicas (or by hand
 * in SQL): hands each notification to the caches. The caches are enabled
 * only once LISTEN is in place and disabled as soon as the session is lost,
 * so a gap in notifications costs speed, never a stale answer.
 */
export class InvalidationListener {
  readonly #channel: ChannelListener;

  constructor(url: string, caches: AuthCaches, onError: (err: unknown) => void = () => {}, retryMs = 1000) {
    this.#channel = new ChannelListener(
      url,
      AUTH_CHANNEL,
      {
        onPayload: (payload) => caches.apply(payload),
        onUp: () => caches.enable(),
        onDown: () => caches.disable(),
        onError,
      },
      retryMs,
    );
  }

  start(): Promise<void> {
    return this.#channel.start();
  }

  stop(): Promise<void> {
    return this.#channel.stop();
  }
}
