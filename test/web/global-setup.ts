/**
 * Builds the dashboard (src/web → dist/web) with Vite's JS API before the tests run, when the build is
 * missing or older than any file of src/web, so `npm install && npm test` works from a fresh clone.
 */
import { join } from 'node:path';
import { dashboardIsStale, WEB_SRC } from '../../scripts/build-freshness.mjs';

export { dashboardIsStale };

export default async function setup(): Promise<void> {
  if (!dashboardIsStale()) return;
  const { build } = await import('vite');
  await build({ configFile: join(WEB_SRC, 'vite.config.ts'), logLevel: 'warn' });
}
