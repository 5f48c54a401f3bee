const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Big-endian base62 of the bytes, left-padded to `width` characters. */
export function base62(bytes: Uint8Array, width = 0): string {
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  let out = "";
  while (n > 0n) {
    out = ALPHABET[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out.padStart(width, "0");
}

export const isBase62 = (s: string): boolean => /^[0-9A-Za-z]+$/.test(s);

/** base62() of a uint32's four big-endian bytes, in plain numbers: no BigInt or byte array (an API key's checksum, on every verify). */
export function base62Uint32(n: number, width = 0): string {
  let v = n >>> 0;
  let out = "";
  while (v > 0) {
    out = ALPHABET[v % 62] + out;
    v = Math.floor(v / 62);
  }
  return out.padStart(width, "0");
}
