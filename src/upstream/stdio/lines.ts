/**
 * Splits a byte stream into lines without ever holding more than a bounded line in memory.
 *
 * - `strict`: a line longer than `maxLineBytes` is an overflow (`onOverflow`, then nothing more is
 *   read): stdout, where a line is a JSON-RPC message and a cut one is worthless.
 * - `truncate`: a longer line is cut at `maxLineBytes` and the rest of it dropped: stderr, where a
 *   line is a log message and its start is what matters.
 *
 * Chunks are scanned once (no re-concatenation per chunk), so a huge line costs O(size), and a
 * trailing `\r` is removed (CRLF servers exist).
 */
export interface LineSplitterOptions {
  maxLineBytes: number;
  mode: 'strict' | 'truncate';
  onLine: (line: string, truncated: boolean) => void;
  /** strict mode: the line in progress passed `maxLineBytes` (the splitter is finished). */
  onOverflow?: (bytes: number) => void;
}

const NEWLINE = 0x0a;

export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** truncate mode: the rest of the current line is being dropped. */
  private dropping = false;
  private truncatedLine = false;
  private done = false;

  constructor(private readonly options: LineSplitterOptions) {}

  get finished(): boolean {
    return this.done;
  }

  /** Stops delivering lines; later chunks are ignored. */
  finish(): void {
    this.done = true;
    this.pending = [];
    this.pendingBytes = 0;
  }

  push(chunk: Buffer): void {
    let start = 0;
    while (!this.done && start <= chunk.length) {
      const index = chunk.indexOf(NEWLINE, start);
      const end = index === -1 ? chunk.length : index;
      this.take(chunk.subarray(start, end));
      if (this.done || index === -1) return;
      this.emit();
      start = index + 1;
    }
  }

  /** Delivers a last unterminated line (the stream ended). */
  end(): void {
    if (!this.done && (this.pendingBytes > 0 || this.truncatedLine)) this.emit();
  }

  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.dropping) return;
    const { maxLineBytes } = this.options;
    if (this.pendingBytes + piece.length > maxLineBytes) {
      if (this.options.mode === 'strict') {
        const bytes = this.pendingBytes + piece.length;
        this.finish();
        this.options.onOverflow?.(bytes);
        return;
      }
      piece = piece.subarray(0, maxLineBytes - this.pendingBytes);
      this.dropping = true;
      this.truncatedLine = true;
    }
    this.pending.push(piece);
    this.pendingBytes += piece.length;
  }

  private emit(): void {
    const parts = this.pending;
    const bytes = this.pendingBytes;
    const truncated = this.truncatedLine;
    this.pending = [];
    this.pendingBytes = 0;
    this.dropping = false;
    this.truncatedLine = false;
    let line = parts.length === 1 ? parts[0]!.toString('utf8') : Buffer.concat(parts, bytes).toString('utf8');
    if (line.endsWith('\r')) line = line.slice(0, -1);
    this.options.onLine(line, truncated);
  }
}
