import { PlatformError } from "@platform/errors";
import type { ModelProvider } from "./provider.ts";

/** Resolves an agent's `provider/model` string to a provider and model name. */
export class ProviderRegistry {
  readonly #providers = new Map<string, ModelProvider>();

  register(prefix: string, provider: ModelProvider): this {
    this.#providers.set(prefix, provider);
    return this;
  }

  resolve(model: string): { provider: ModelProvider; model: string } {
    const slash = model.indexOf("/");
    const prefix = slash > 0 ? model.slice(0, slash) : "";
    const provider = this.#providers.get(prefix);
    if (!provider) {
      const known = [...this.#providers.keys()].map((p) => `${p}/`).join(", ");
      throw PlatformError.unavailable(`no model provider configured for "${model}" (configured: ${known || "none"})`);
    }
    return { provider, model: model.slice(slash + 1) };
  }
}
