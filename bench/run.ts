/**
 * `npm run bench [-- conduit|hub|stdio ...]`: runs the chosen sections (all when none is named) and prints
 * each one's table and target verdicts on stdout; progress goes to stderr. Every process it starts is
 * stopped at the end, on an error, and on Ctrl-C (see `children.ts` and `orphan-guard.ts`).
 */
import { stopAll } from './children.js';
import { conduitSection } from './conduit-section.js';
import { contextSection } from './context-section.js';
import { fleetSection } from './fleet-section.js';
import { hubSection } from './hub-section.js';
import { memorySection } from './memory-section.js';
import { overviewSection } from './overview-section.js';
import { buildProduct } from './product.js';
import { schemasSection } from './schemas-section.js';
import { stdioSandboxSection } from './stdio-sandbox-section.js';
import { stdioSection } from './stdio-section.js';

const SECTIONS: Record<string, () => Promise<string>> = {
  conduit: conduitSection,
  hub: hubSection,
  memory: memorySection,
  stdio: stdioSection,
  schemas: schemasSection,
  'stdio-sandbox': stdioSandboxSection,
  context: contextSection,
  fleet: fleetSection,
  overview: overviewSection,
};
/**
 * Each section is bounded: past this, whatever is running is stopped and the run fails. Per section, not per run:
 * a full run on a slow machine takes longer than one section ever should.
 */
const SECTION_LIMIT_MS = Number(process.env.BENCH_SECTION_LIMIT_MS ?? 15 * 60_000);

const asked = process.argv.slice(2).filter((a) => a !== '--');
const unknown = asked.filter((a) => !(a in SECTIONS));
if (unknown.length > 0) {
  process.stderr.write(`unknown section ${unknown.join(', ')}; choose from: ${Object.keys(SECTIONS).join(', ')}\n`);
  process.exit(2);
}
const chosen = asked.length > 0 ? asked : Object.keys(SECTIONS);

let interrupted = false;
const interrupt = (signal: string) => {
  if (interrupted) return;
  interrupted = true;
  process.stderr.write(`\n${signal}: stopping every benchmark process\n`);
  void stopAll().finally(() => process.exit(130));
};
process.on('SIGINT', () => interrupt('SIGINT'));
process.on('SIGTERM', () => interrupt('SIGTERM'));
const started = Date.now();
// The gateways and conduits run the product's build (`product.ts`): brought up to date once, first.
process.stderr.write('building the product (npm run build)\n');
buildProduct();
let failed = false;
for (const name of chosen) {
  const limit = setTimeout(
    () => interrupt(`section ${name}: limit of ${SECTION_LIMIT_MS} ms reached`),
    SECTION_LIMIT_MS,
  );
  limit.unref();
  try {
    const text = await (SECTIONS[name] as () => Promise<string>)();
    process.stdout.write(`\n${text}\n`);
  } catch (error) {
    failed = true;
    process.stderr.write(`section ${name} failed: ${error instanceof Error ? error.message : String(error)}\n`);
    await stopAll();
  } finally {
    clearTimeout(limit);
  }
}
process.stderr.write(`\nbench finished in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
process.exit(failed ? 1 : 0);
