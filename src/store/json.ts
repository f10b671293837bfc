/** JSON columns: parse defensively (a corrupt cell yields the fallback, never a crash). */
export function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (text === null || text === undefined) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

export const nowIso = (): string => new Date().toISOString();
