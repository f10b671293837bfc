/** JSON columns: parse defensively (a corrupt cell yields the fallback, never a crash). */
export function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (text === null || text === undefined) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

/** The second `isoPrefix` belongs to, and its text up to the milliseconds (`2026-12-03T07:36:17.`). */
let isoSecond = Number.NaN;
let isoPrefix = '';

/**
 * Now as ISO-8601 UTC text, like `new Date().toISOString()`. Every call's audit row stamps one, and
 * formatting a date costs several times reading the clock: the text up to the second is reused.
 */
export function nowIso(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== isoSecond) {
    isoSecond = second;
    isoPrefix = new Date(second * 1000).toISOString().slice(0, -4);
  }
  return `${isoPrefix}${String(now - second * 1000).padStart(3, '0')}Z`;
}
