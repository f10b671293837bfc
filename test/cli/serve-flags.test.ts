/**
 * `gatehouse serve` has a flag for every setting of the one config schema (`SETTINGS`), generated from
 * it: this fails when a setting has none. Booleans also get `--no-…`. A flag's value reaches the config.
 */
import { describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/config.js';
import { runCli } from './helpers.js';

describe('gatehouse serve flags', () => {
  it('offers --<flag> for every setting, and --no-<flag> for every boolean one', async () => {
    const help = await runCli(['serve', '--help']);
    expect(help.code).toBe(0);
    const offered = new Set([...help.stdout.matchAll(/^\s+(--[a-z0-9-]+)/gm)].map((m) => m[1]));
    const missing: string[] = [];
    for (const def of Object.values(SETTINGS)) {
      if (!offered.has(`--${def.flag}`)) missing.push(`--${def.flag}`);
      if ('default' in def && typeof def.default === 'boolean' && !offered.has(`--no-${def.flag}`)) {
        missing.push(`--no-${def.flag}`);
      }
    }
    expect(missing).toEqual([]);
  }, 60_000);

  it('passes a flag’s value to the config, where it is validated (a bad one names the flag)', async () => {
    const answer = await runCli(['serve', '--approval-ttl-ms', 'soon', '--tool-name-max', '0']);
    expect(answer.code).toBe(2);
    expect(answer.stderr).toContain('--approval-ttl-ms');
    expect(answer.stderr).toContain('--tool-name-max');
  }, 60_000);
});
