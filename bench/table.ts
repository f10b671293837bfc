/** Plain fixed-width text for the printed sections: tables, figures, the machine line, verdicts. */
import os from 'node:os';

export interface Column {
  title: string;
  align?: 'left' | 'right';
}

/** Renders a table with a header row and a rule; numbers are right-aligned by default. */
export function renderTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const widths = columns.map((c, i) => Math.max(c.title.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => {
        const width = widths[i] as number;
        return (columns[i]?.align ?? 'right') === 'left' ? cell.padEnd(width) : cell.padStart(width);
      })
      .join('  ')
      .trimEnd();
  return [
    line(columns.map((c) => c.title)),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(columns.map((_, i) => r[i] ?? ''))),
  ].join('\n');
}

/** A number with a fixed number of decimals; '—' when there is no figure. */
export function num(value: number | undefined, digits = 1): string {
  return value === undefined || !Number.isFinite(value) ? '—' : value.toFixed(digits);
}

/** A ratio such as `0.76×`; target lines use 3 digits so a figure just under its bar never prints as the bar. */
export function ratio(value: number | undefined, digits = 2): string {
  return value === undefined || !Number.isFinite(value) ? '—' : `${value.toFixed(digits)}×`;
}

export function mb(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(2)} MB`;
}

export function verdict(ok: boolean): string {
  return ok ? 'met' : 'missed';
}

/** Cores, CPU model, node version. */
export function machineLine(): string {
  const cpus = os.cpus();
  const model = (cpus[0]?.model ?? 'unknown CPU').replace(/\s+/g, ' ').trim();
  return `machine: ${cpus.length} cores (${model}), node ${process.version}, ${os.platform()}`;
}

/**
 * The machine's 1-minute load average as the cells saw it: other work on the machine takes CPU from
 * the parties, so above the core count every figure is lower (and noisier) than on an idle machine.
 */
export function loadLine(range: { min: number; max: number } | undefined): string {
  if (!range) return 'load average (1 min) during the cells: —';
  const cores = os.cpus().length;
  const busy =
    range.max > cores
      ? ` — above ${cores}: other work was competing for the CPU, so the figures are lower and noisier than on an idle machine`
      : '';
  return `load average (1 min) during the cells: ${range.min.toFixed(2)}–${range.max.toFixed(2)}${busy}`;
}
