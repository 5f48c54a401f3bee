import { useEffect, useState } from "preact/hooks";

/** The app's place: the location hash (#/agents/…), so a reload opens the same screen. */
export function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, "").split("?")[0]!.split("/").filter(Boolean);
  const [parts, setParts] = useState(read);
  useEffect(() => {
    const on = () => setParts(read());
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return parts;
}

export function go(path: string): void {
  location.hash = `#/${path}`;
}
