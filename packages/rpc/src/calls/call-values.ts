import type { ContextKey, ContextValues } from "@connectrpc/connect";

/**
 * A call's context values, as connect's createContextValues keeps them (on
 * the object, by each key's symbol), with the methods on the prototype:
 * createContextValues makes three closures a call, which an open stream
 * keeps for as long as it lasts.
 */
export class CallValues implements ContextValues {
  get<T>(key: ContextKey<T>): T {
    return key.id in this ? (this as unknown as Record<symbol, T>)[key.id]! : key.defaultValue;
  }

  set<T>(key: ContextKey<T>, value: T): this {
    (this as unknown as Record<symbol, T>)[key.id] = value;
    return this;
  }

  delete(key: ContextKey<unknown>): this {
    delete (this as unknown as Record<symbol, unknown>)[key.id];
    return this;
  }
}
