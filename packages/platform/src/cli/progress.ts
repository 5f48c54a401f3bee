/**
 * A one-line progress bar on stderr for a long transfer, redrawn at most
 * every 200 ms: only when stderr is a terminal and the output is not --json,
 * so pipes, logs and scripts get none.
 */
export class Progress {
  readonly #label: string;
  readonly #total: number;
  readonly #started = Date.now();
  #drawn = 0;
  #done = 0;

  private constructor(label: string, total: number) {
    this.#label = label;
    this.#total = total;
  }

  /** A bar when it is wanted: a terminal, not --json, and a file of at least `threshold` bytes. */
  static maybe(label: string, total: number, json: boolean, threshold = 8 * 1024 * 1024): Progress | undefined {
    if (json || !process.stderr.isTTY || total < threshold) return undefined;
    return new Progress(label, total);
  }

  add(bytes: number): void {
    this.#done += bytes;
    if (Date.now() - this.#drawn >= 200) this.#draw();
  }

  end(): void {
    this.#draw();
    process.stderr.write("\n");
  }

  #draw(): void {
    this.#drawn = Date.now();
    const fraction = this.#total > 0 ? Math.min(1, this.#done / this.#total) : 1;
    const width = 30;
    const filled = Math.round(fraction * width);
    const seconds = Math.max(0.001, (Date.now() - this.#started) / 1000);
    const rate = this.#done / seconds / (1024 * 1024);
    process.stderr.write(
      `\r${this.#label} [${"#".repeat(filled)}${"-".repeat(width - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${mib(this.#done)}/${mib(this.#total)} MiB ${rate.toFixed(1)} MiB/s`,
    );
  }
}

function mib(bytes: number): string {
  return (bytes / (1024 * 1024)).toFixed(1);
}
