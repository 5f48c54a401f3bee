// Kubernetes resource quantities ("500m", "1Gi", "2e3") as numbers, enough to
// validate and compare requests, limits and storage sizes.
const SUFFIX: Record<string, number> = {
  "": 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const QUANTITY = /^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+)?$/;

/** The numeric value of a quantity, or undefined when it does not parse. */
export function parseQuantity(q: string | number): number | undefined {
  if (typeof q === "number") return q;
  const m = QUANTITY.exec(q);
  if (!m) return undefined;
  const n = Number(m[1]);
  const s = m[2] ?? "";
  if (/^[eE]/.test(s)) return n * 10 ** Number(s.slice(1));
  return n * SUFFIX[s];
}
