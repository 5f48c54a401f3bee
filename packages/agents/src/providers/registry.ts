import { PlatformError } from "@platform/errors";
import type { Models } from "../domain/ports.ts";
import type { ModelProvider } from "./provider.ts";

/** Resolves an agent's `provider/model` string to a provider and model name. */
export class ProviderRegistry implements Models {
  readonly #providers = new Map<string, ModelProvider>();
  /** Providers this build has but the configuration did not turn on: the setting that would. */
  readonly #unconfigured = new Map<string, string>();

  register(prefix: string, provider: ModelProvider): this {
    this.#providers.set(prefix, provider);
    this.#unconfigured.delete(prefix);
    return this;
  }

  /** A provider that exists but is off; `setting` says what turns it on (e.g. ANTHROPIC_API_KEY). */
  unconfigured(prefix: string, setting: string): this {
    if (!this.#providers.has(prefix)) this.#unconfigured.set(prefix, setting);
    return this;
  }

  /**
   * Refuses (INVALID_ARGUMENT) a model no configured provider serves, naming
   * the setting that would enable its provider, so an agent that could never
   * answer is not created.
   */
  check(model: string): void {
    const why = this.#missing(model);
    if (why) throw PlatformError.invalidArgument(why);
  }

  resolve(model: string): { provider: ModelProvider; model: string } {
    const slash = model.indexOf("/");
    const provider = slash > 0 ? this.#providers.get(model.slice(0, slash)) : undefined;
    // An agent made before its provider was turned off (a restart without
    // the key): the model cannot be reached now.
    if (!provider) throw PlatformError.unavailable(this.#missing(model) ?? `no model provider for "${model}"`);
    return { provider, model: model.slice(slash + 1) };
  }

  #missing(model: string): string | undefined {
    const slash = model.indexOf("/");
    const prefix = slash > 0 ? model.slice(0, slash) : "";
    if (this.#providers.has(prefix) && slash < model.length - 1) return undefined;
    const setting = this.#unconfigured.get(prefix);
    if (setting)
      return `model "${model}": the ${prefix} provider is not configured; set ${setting} on the agents service`;
    const known = [...this.#providers.keys(), ...this.#unconfigured.keys()].map((p) => `${p}/`).join(", ");
    return `model "${model}" must be "<provider>/<name>" with a provider of ${known || "none"}`;
  }
}
