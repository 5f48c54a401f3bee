export declare const BUNDLE_CACHE: string;
export declare const CLI_BUNDLE_CACHE: string;
export declare const CLI_ENTRIES: { cli: string };
export declare const PLATFORM_ENTRIES: {
  readonly launcher: string;
  readonly identity: string;
  readonly compute: string;
  readonly agents: string;
  readonly runtime: string;
  readonly e2b: string;
};
export declare const RECIPE: string;
export declare function sha256(bytes: Uint8Array | string): string;
export declare function manifestPath(cacheDir: string, entries: Record<string, string>): string;
export declare function cachedBundles(
  cacheDir: string,
  entries: Record<string, string>,
): Promise<Record<string, string> | undefined>;
export declare function exists(path: string): Promise<boolean>;
