/**
 * Section `schemas` (issue 15): how long one argument validation holds the event loop when the upstream's
 * schema is hostile. In process, on the product's `ArgumentValidator`: a validation is synchronous, so its
 * wall time is exactly the time the loop is held. Each cell compiles the schema once (its own column: the
 * first call of a tool pays it), then validates the hostile argument `RUNS` times and keeps the worst.
 * Beside it, the same argument on a plain Ajv with the native RegExp engine, where that ends in seconds
 * (the 29-byte `^(a|a)*$` case is shown at 24 bytes there: each byte doubles it).
 * Target (issue 15): no single validation over 50 ms.
 */
import { Ajv } from 'ajv';
import { ArgumentValidator } from '../src/policy/arguments.js';
import { machineLine, num, renderTable, verdict } from './table.js';

const RUNS = 5;

interface Cell {
  name: string;
  schema: Record<string, unknown>;
  argument: Record<string, unknown>;
  /** The argument for the native engine when the hostile one would take minutes there. */
  nativeArgument?: Record<string, unknown>;
  nativeNote?: string;
}

const objects = (n: number) => Array.from({ length: n }, (_, i) => ({ id: i, tags: ['x', i % 7], nested: { n: i } }));

const CELLS: Cell[] = [
  {
    name: 'pattern ^(a|a)*$, 29 bytes',
    schema: { type: 'object', properties: { text: { type: 'string', pattern: '^(a|a)*$' } } },
    argument: { text: `${'a'.repeat(28)}b` },
    nativeArgument: { text: `${'a'.repeat(23)}b` },
    nativeNote: 'native at 24 bytes',
  },
  {
    name: 'pattern ^(a|a)*$, 1 MB',
    schema: { type: 'object', properties: { text: { type: 'string', pattern: '^(a|a)*$' } } },
    argument: { text: `${'a'.repeat(1024 * 1024 - 1)}b` },
    nativeArgument: { text: `${'a'.repeat(23)}b` },
    nativeNote: 'native at 24 bytes',
  },
  {
    name: 'pattern (x+x+)+y, 5,000 bytes',
    schema: { type: 'object', properties: { text: { type: 'string', pattern: '(x+x+)+y' } } },
    argument: { text: 'x'.repeat(5000) },
    nativeArgument: { text: 'x'.repeat(24) },
    nativeNote: 'native at 24 bytes',
  },
  {
    name: 'patternProperties ^(a|a)*$ × 20,000 keys',
    schema: { type: 'object', patternProperties: { '^(a|a)*$': { type: 'string' } } },
    argument: Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`${'a'.repeat(8)}${i}`, 'v'])),
  },
  {
    name: 'uniqueItems, 6,000 objects',
    schema: { type: 'object', properties: { list: { type: 'array', uniqueItems: true } } },
    argument: { list: objects(6000) },
  },
  {
    name: 'uniqueItems, 20,000 objects',
    schema: { type: 'object', properties: { list: { type: 'array', uniqueItems: true } } },
    argument: { list: objects(20_000) },
  },
];

function worstOf(runs: number, fn: () => void): number {
  let worst = 0;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    try {
      fn();
    } catch {
      // a refusal is an answer: only its time matters here
    }
    worst = Math.max(worst, performance.now() - started);
  }
  return worst;
}

export async function schemasSection(): Promise<string> {
  const rows: string[][] = [];
  let worstValidation = 0;
  for (const [index, cell] of CELLS.entries()) {
    process.stderr.write(`schemas: ${cell.name}\n`);
    const validator = new ArgumentValidator();
    const key = `cell-${index}`;
    const compileMs = worstOf(1, () => validator.validate(key, cell.schema, {}));
    const validateMs = worstOf(RUNS, () => validator.validate(key, cell.schema, cell.argument));
    worstValidation = Math.max(worstValidation, validateMs);
    const native = new Ajv({ strict: false, allErrors: true, validateSchema: false, allowUnionTypes: true }).compile(
      cell.schema,
    );
    const nativeMs = worstOf(1, () => native(cell.nativeArgument ?? cell.argument));
    rows.push([cell.name, num(compileMs, 1), num(validateMs, 2), num(nativeMs, 1), cell.nativeNote ?? '']);
  }
  const table = renderTable(
    [
      { title: 'hostile schema and argument', align: 'left' },
      { title: 'compile ms' },
      { title: `worst validation ms (${RUNS} runs)` },
      { title: 'native Ajv ms' },
      { title: '', align: 'left' },
    ],
    rows,
  );
  return [
    '## schemas — event-loop hold of one argument validation, hostile upstream schemas (in process)',
    machineLine(),
    'Gatehouse: RE2 (re2js) for pattern/patternProperties, uniqueItems by canonical JSON in a set; native: Ajv defaults.',
    '',
    table,
    '',
    `target: no single validation over 50 ms — worst ${num(worstValidation, 2)} ms, ${verdict(worstValidation <= 50)}`,
    'note: compiling a schema (once per pin, on the first call) is not bounded by this change; see the compile column.',
  ].join('\n');
}
