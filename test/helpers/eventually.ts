/** Waiting, in tests, for what happens in the background. */

/**
 * Runs `check` (assertions) until it passes: every `everyMs`, for at most `ms`, after which its last
 * failure is the test's failure. A bound on waiting, never a measurement.
 */
export async function eventually(check: () => Promise<void> | void, ms = 10_000, everyMs = 25): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() > end) throw error;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  }
}
