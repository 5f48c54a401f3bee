/** Counts the AbortControllers made until restore() (the global is what the code constructs). */
export function countAbortControllers(): { count: number; restore: () => void } {
  const original = globalThis.AbortController;
  const state = {
    count: 0,
    restore: () => {
      globalThis.AbortController = original;
    },
  };
  globalThis.AbortController = class extends original {
    constructor() {
      super();
      state.count++;
    }
  };
  return state;
}
