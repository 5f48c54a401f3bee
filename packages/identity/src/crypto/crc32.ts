const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE 802.3), as used by zlib and GitHub's token checksums. */
export function crc32(data: Uint8Array | string): number {
  if (typeof data === "string") return crc32OfString(data);
  let c = 0xffffffff;
  for (const b of data) c = TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/**
 * An ASCII string's CRC read from its char codes (its UTF-8 bytes are the
 * same), else its UTF-8 bytes': every API key verified is checksummed, and
 * a Buffer a call was part of the allocation that paces identity's
 * scavenges at 1,000 verifies/s (packages/bench/ANALYSIS.md).
 */
function crc32OfString(s: string): number {
  let c = 0xffffffff;
  for (let i = 0; i < s.length; i++) {
    const b = s.charCodeAt(i);
    if (b > 0x7f) return crc32(Buffer.from(s, "utf8"));
    c = TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  }
  return (c ^ 0xffffffff) >>> 0;
}
