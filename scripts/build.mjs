/**
 * `npm run build` (and so `npm start`): builds only what is stale. The server with tsc (incremental, its state
 * in dist/.tsbuildinfo), the dashboard with Vite; a part whose output is newer than its inputs is skipped, so a
 * restart with nothing changed starts at once. `--force` rebuilds both.
 */
import { execFileSync } from 'node:child_process';
import { utimesSync } from 'node:fs';
import { join } from 'node:path';
import { dashboardIsStale, ROOT, SERVER_BUILD_INFO, serverIsStale, WEB_SRC } from './build-freshness.mjs';

const force = process.argv.includes('--force');

if (force || serverIsStale()) {
  const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
  const args = ['-p', 'tsconfig.build.json', '--incremental', '--tsBuildInfoFile', SERVER_BUILD_INFO];
  execFileSync(process.execPath, [tsc, ...args], { cwd: ROOT, stdio: 'inherit' });
  // tsc leaves the file alone when nothing needed emitting; its time is what marks the build current.
  const now = new Date();
  utimesSync(SERVER_BUILD_INFO, now, now);
} else {
  process.stderr.write('build: server is up to date (dist)\n');
}

if (force || dashboardIsStale()) {
  const { build } = await import('vite');
  await build({ configFile: join(WEB_SRC, 'vite.config.ts'), logLevel: 'warn' });
} else {
  process.stderr.write('build: dashboard is up to date (dist/web)\n');
}
