/** One measured cell: a load-generator run with the CPU counters of the parties read around its measured phase. */
import os from 'node:os';
import { type Party, procCpuMs, runLoad } from './children.js';
import type { LoadReport } from './load.js';
import { num, ratio, renderTable } from './table.js';

/** Measured phase and warm-up per cell; the environment overrides exist for quick trial runs only. */
export const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5_000);
export const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 1_000);

/** The machine's 1-minute load average at the start of every cell since the last `takeLoadSamples()`. */
const loadSamples: number[] = [];

/** Records the load average now (for runs outside `measureCell`). */
export function noteLoad(): void {
  loadSamples.push(os.loadavg()[0] ?? 0);
}

/** The range of the load averages seen since the last call, which it forgets. */
export function takeLoadSamples(): { min: number; max: number } | undefined {
  const samples = loadSamples.splice(0);
  return samples.length === 0 ? undefined : { min: Math.min(...samples), max: Math.max(...samples) };
}

export interface CellResult {
  report: LoadReport;
  /**
   * The CPU of the process in the middle in the measured phase, per call: the gateway's (or conduit's), from its
   * `process.cpuUsage()`, or the bare proxy's, from /proc.
   */
  gatewayCpuMsPerCall: number | undefined;
  /** The upstream process's CPU in the measured phase, per call (from /proc). */
  upstreamCpuMsPerCall: number | undefined;
}

export async function measureCell(
  label: string,
  load: Record<string, string | number | undefined>,
  parties: { gateway?: Party | undefined; upstreamPid: number; proxyPid?: number | undefined },
): Promise<CellResult> {
  noteLoad();
  process.stderr.write(`  ${label} … `);
  let gateway0: number | undefined;
  let gateway1: number | undefined;
  let upstream0: number | undefined;
  let upstream1: number | undefined;
  const middleCpuMs = async () =>
    parties.gateway
      ? parties.gateway.cpuMs()
      : parties.proxyPid !== undefined
        ? procCpuMs(parties.proxyPid)
        : undefined;
  const report = await runLoad(
    { 'duration-ms': DURATION_MS, 'warmup-ms': WARMUP_MS, ...load },
    {
      beforeMeasure: async () => {
        upstream0 = procCpuMs(parties.upstreamPid);
        gateway0 = await middleCpuMs();
      },
      afterMeasure: async () => {
        gateway1 = await middleCpuMs();
        upstream1 = procCpuMs(parties.upstreamPid);
      },
    },
  );
  const perCall = (a: number | undefined, b: number | undefined) =>
    a === undefined || b === undefined || report.calls === 0 ? undefined : (b - a) / report.calls;
  const result = {
    report,
    gatewayCpuMsPerCall: perCall(gateway0, gateway1),
    upstreamCpuMsPerCall: perCall(upstream0, upstream1),
  };
  process.stderr.write(
    `${num(report.callsPerS, 0)} calls/s, p50 ${num(report.p50Ms, 2)} ms` +
      `${report.errors > 0 ? `, ${report.errors} errors (${report.firstError})` : ''}\n`,
  );
  return result;
}

/** One measured row of a "direct vs through a gateway" comparison. */
export interface CallRow {
  path: string;
  era: string;
  c: number;
  cell: CellResult;
  /** The direct cell this one is compared with; absent on the direct rows themselves. */
  direct?: CellResult;
}

/** The call table every section prints the same way; `gateway` names the process in the middle. */
export function renderCallTable(rows: readonly CallRow[], columns: { era: string; gateway: string }): string {
  return renderTable(
    [
      { title: 'path', align: 'left' },
      { title: columns.era, align: 'left' },
      { title: 'c' },
      { title: 'calls/s' },
      { title: 'p50 ms' },
      { title: 'p99 ms' },
      { title: `${columns.gateway} CPU ms/call` },
      { title: 'upstream CPU ms/call' },
      { title: 'client CPU ms/call' },
      { title: '× direct' },
      { title: 'errors' },
    ],
    rows.map(({ path, era, c, cell, direct }) => [
      path,
      era,
      String(c),
      num(cell.report.callsPerS, 0),
      num(cell.report.p50Ms, 2),
      num(cell.report.p99Ms, 2),
      num(cell.gatewayCpuMsPerCall, 3),
      num(cell.upstreamCpuMsPerCall, 3),
      num(cell.report.loadCpuMsPerCall, 3),
      direct ? ratio(cell.report.callsPerS / direct.report.callsPerS) : '1.00×',
      String(cell.report.errors),
    ]),
  );
}
