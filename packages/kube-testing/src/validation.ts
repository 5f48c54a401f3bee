// The object-metadata rules of apimachinery validation that client code most
// often gets wrong: DNS names, label and annotation keys and values.
export type Cause = { field: string; message: string };

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** The API server's DNS-1123 label rule (names of most objects): the causes of a violation, or none. */
export function dns1123Label(field: string, v: unknown): Cause[] {
  if (typeof v !== "string" || v.length > 63 || !DNS1123_LABEL.test(v)) {
    return [
      {
        field,
        message: `Invalid value: ${JSON.stringify(v)}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character`,
      },
    ];
  }
  return [];
}

/** The API server's DNS-1123 subdomain rule (e.g. ConfigMap names): the causes of a violation, or none. */
export function dns1123Subdomain(field: string, v: unknown): Cause[] {
  if (typeof v !== "string" || v.length > 253 || !DNS1123_SUBDOMAIN.test(v)) {
    return [
      {
        field,
        message: `Invalid value: ${JSON.stringify(v)}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      },
    ];
  }
  return [];
}

/** The API server's DNS-1035 label rule (Service names): the causes of a violation, or none. */
export function dns1035Label(field: string, v: unknown): Cause[] {
  if (typeof v !== "string" || v.length > 63 || !DNS1035_LABEL.test(v)) {
    return [
      {
        field,
        message: `Invalid value: ${JSON.stringify(v)}: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character`,
      },
    ];
  }
  return [];
}

function qualifiedName(field: string, key: string): Cause[] {
  const parts = key.split("/");
  if (parts.length > 2)
    return [
      {
        field,
        message: `Invalid value: ${JSON.stringify(key)}: a qualified name must consist of alphanumeric characters, '-', '_' or '.'`,
      },
    ];
  const [prefix, name] = parts.length === 2 ? parts : [undefined, parts[0]];
  const causes: Cause[] = [];
  if (prefix !== undefined) causes.push(...dns1123Subdomain(field, prefix));
  if (name.length === 0 || name.length > 63 || !QUALIFIED_NAME.test(name)) {
    causes.push({
      field,
      message: `Invalid value: ${JSON.stringify(key)}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    });
  }
  return causes;
}

/** The API server's rules for a labels map (qualified keys, ≤ 63-character values). */
export function labels(field: string, v: unknown): Cause[] {
  if (v === undefined || v === null) return [];
  if (typeof v !== "object") return [{ field, message: "Invalid value: labels must be an object" }];
  const causes: Cause[] = [];
  for (const [k, val] of Object.entries(v)) {
    causes.push(...qualifiedName(field, k));
    if (typeof val !== "string" || val.length > 63 || (val !== "" && !QUALIFIED_NAME.test(val))) {
      causes.push({
        field: `${field}`,
        message: `Invalid value: ${JSON.stringify(val)}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
      });
    }
  }
  return causes;
}

/** The API server's rules for an annotations map (qualified keys, 256 KiB in total). */
export function annotations(field: string, v: unknown): Cause[] {
  if (v === undefined || v === null) return [];
  if (typeof v !== "object") return [{ field, message: "Invalid value: annotations must be an object" }];
  const causes: Cause[] = [];
  let total = 0;
  for (const [k, val] of Object.entries(v)) {
    causes.push(...qualifiedName(field, k));
    if (typeof val !== "string") causes.push({ field, message: `Invalid value: annotation ${k} must be a string` });
    total += k.length + String(val).length;
  }
  if (total > 256 * 1024) causes.push({ field, message: "Too long: must have at most 262144 bytes" });
  return causes;
}
