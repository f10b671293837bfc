/**
 * Section `conduit` (issue 2): direct SDK client → upstream against the same upstream through the
 * conduit's `POST /ops/call-tool`, pooled and fresh-session, at concurrency 1 and 16, against a
 * 2026-07-28 upstream and a 2025-era (sessionful) one; then the heap check of a pooled conduit at
 * 10k and 50k calls.
 */

import {
  type CallRow,
  DURATION_MS,
  measureCell,
  noteLoad,
  renderCallTable,
  takeLoadSamples,
  WARMUP_MS,
} from './cells.js';
import { childEnv, type Party, runLoad, startParty, UPSTREAM_PRELOAD } from './children.js';
import { loadLine, machineLine, mb, num, ratio, verdict } from './table.js';

const ERAS = [
  { era: 'modern', label: '2026-07-28' },
  { era: 'legacy', label: '2025 (sessions)' },
] as const;
const CONCURRENCY = [1, 16] as const;
const HEAP_FIRST = 10_000;
const HEAP_TOTAL = 50_000;
/** Each heap phase ends here even short of its count (then the check is reported as not completed). */
const HEAP_MAX_MS = 360_000;
const LOG_LEVEL = 'warn';

function upstream(era: 'modern' | 'legacy'): Promise<Party> {
  return startParty(`${era} upstream`, 'test/fixtures/upstream-process.ts', [era], childEnv(), {
    preload: UPSTREAM_PRELOAD,
  });
}

function conduitEnv(mode: 'pooled' | 'fresh'): NodeJS.ProcessEnv {
  return childEnv({ MCP_ALLOW_PRIVATE_NETWORKS: 'true', MCP_SESSION_MODE: mode, LOG_LEVEL });
}

type Row = CallRow;

export async function conduitSection(): Promise<string> {
  const machine = machineLine();
  takeLoadSamples();
  let load: ReturnType<typeof takeLoadSamples>;
  const parties: Party[] = [];
  const started = async (party: Promise<Party>) => {
    const p = await party;
    parties.push(p);
    return p;
  };
  const rows: Row[] = [];
  let heap: { at10k: NodeJS.MemoryUsage; at50k: NodeJS.MemoryUsage; complete: boolean; callsPerS: number };
  try {
    process.stderr.write('conduit: starting upstreams and conduits\n');
    const upstreams = {
      modern: await started(upstream('modern')),
      legacy: await started(upstream('legacy')),
    };
    const pooled = await started(
      startParty('pooled conduit', 'bench/conduit-process.ts', [], conduitEnv('pooled'), { launcher: true }),
    );
    const fresh = await started(
      startParty('fresh conduit', 'bench/conduit-process.ts', [], conduitEnv('fresh'), { launcher: true }),
    );

    for (const { era, label } of ERAS) {
      const upstream = upstreams[era];
      for (const c of CONCURRENCY) {
        const common = { concurrency: c };
        const direct = await measureCell(
          `direct ${era} c=${c}`,
          { ...common, mode: 'sdk', url: upstream.info.url, era },
          { upstreamPid: upstream.info.pid },
        );
        rows.push({ path: 'direct SDK client', era: label, c, cell: direct });
        for (const [name, conduit] of [
          ['conduit pooled', pooled],
          ['conduit fresh session', fresh],
        ] as const) {
          const cell = await measureCell(
            `${name} ${era} c=${c}`,
            { ...common, mode: 'ops', url: conduit.info.url, upstream: upstream.info.url },
            { gateway: conduit, upstreamPid: upstream.info.pid },
          );
          rows.push({ path: name, era: label, c, cell, direct });
        }
      }
    }
    await pooled.stop();
    await fresh.stop();

    process.stderr.write(`conduit: heap check (a new pooled conduit, ${HEAP_TOTAL} calls at c=16, 2025 upstream)\n`);
    const heapConduit = await started(
      startParty('heap conduit', 'bench/conduit-process.ts', [], conduitEnv('pooled'), { launcher: true }),
    );
    const heapRun = (count: number) => {
      noteLoad();
      return runLoad(
        {
          mode: 'ops',
          url: heapConduit.info.url,
          upstream: upstreams.legacy.info.url,
          concurrency: 16,
          count,
          'warmup-ms': 0,
          'max-ms': HEAP_MAX_MS,
        },
        {},
        HEAP_MAX_MS + 60_000,
      );
    };
    const first = await heapRun(HEAP_FIRST);
    const at10k = (await heapConduit.ask('gc')).memory;
    const rest = await heapRun(HEAP_TOTAL - HEAP_FIRST);
    const at50k = (await heapConduit.ask('gc')).memory;
    heap = {
      at10k,
      at50k,
      complete: first.complete && rest.complete && first.errors + rest.errors === 0,
      callsPerS: (first.calls + rest.calls) / ((first.elapsedMs + rest.elapsedMs) / 1000),
    };
    process.stderr.write(
      `  heap ${mb(at10k.heapUsed)} at 10k, ${mb(at50k.heapUsed)} at 50k` +
        `${heap.complete ? '' : ` (incomplete: ${first.firstError ?? rest.firstError ?? 'count not reached in time'})`}\n`,
    );
  } finally {
    load = takeLoadSamples();
    await Promise.all(parties.map((p) => p.stop()));
  }

  const table = renderCallTable(rows, { era: 'upstream era', gateway: 'conduit' });

  const find = (path: string, era: string, c: number) =>
    rows.find((r) => r.path === path && r.era === era && r.c === c)?.cell.report;
  const targets: string[] = [];
  for (const { label } of ERAS) {
    const pooled = find('conduit pooled', label, 16);
    const direct = find('direct SDK client', label, 16);
    const r = pooled && direct ? pooled.callsPerS / direct.callsPerS : Number.NaN;
    targets.push(
      `  pooled throughput at c=16 ≥ 0.6× direct (${label} upstream): ${ratio(r, 3)} — ${verdict(r >= 0.6 && pooled?.errors === 0)}`,
    );
  }
  const legacy = ERAS[1].label;
  for (const c of CONCURRENCY) {
    const pooled = find('conduit pooled', legacy, c);
    const fresh = find('conduit fresh session', legacy, c);
    const r = pooled && fresh ? pooled.callsPerS / fresh.callsPerS : Number.NaN;
    targets.push(
      `  pooled ≥ 3× fresh-session throughput, 2025 upstream, c=${c}: ${ratio(r, 3)} — ${verdict(r >= 3 && pooled?.errors === 0)}`,
    );
  }
  const growth = heap.at50k.heapUsed / heap.at10k.heapUsed - 1;
  targets.push(
    `  heap after forced GC at ${HEAP_TOTAL / 1000}k pooled calls within 10% of the heap at ${HEAP_FIRST / 1000}k: ` +
      `${mb(heap.at10k.heapUsed)} at 10k, ${mb(heap.at50k.heapUsed)} at 50k (${growth >= 0 ? '+' : ''}${(growth * 100).toFixed(2)}%; ` +
      `rss ${mb(heap.at10k.rss)} → ${mb(heap.at50k.rss)}; ${num(heap.callsPerS, 0)} calls/s) — ` +
      `${heap.complete ? verdict(Math.abs(growth) <= 0.1) : 'missed (the run did not complete: see above)'}`,
  );

  return [
    `== conduit: tools/call "echo" on loopback — direct SDK client → upstream vs POST /ops/call-tool through the conduit (pooled sessions, fresh session per call)`,
    `   upstream, conduit and load generator are separate processes; ${DURATION_MS / 1000} s measured per cell after ${WARMUP_MS / 1000} s warm-up; c = concurrent callers in a closed loop; conduit log level ${LOG_LEVEL}; upstream HTTP keep-alive 5 s`,
    `   ${machine}; ${loadLine(load)}`,
    '',
    table,
    '',
    'targets:',
    ...targets,
  ].join('\n');
}
