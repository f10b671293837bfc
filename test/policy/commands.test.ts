/**
 * `allowedProgram`: the file a stdio child runs is resolved once on the PATH the child gets, and that file
 * is what `stdio.allowedCommands` is checked against (bare names read on the gateway's PATH).
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { allowedProgram } from '../../src/policy/commands.js';
import { resolveOnPath } from '../../src/upstream/stdio/index.js';

const PATH = '/usr/local/bin:/usr/bin:/bin';
const NODE = resolveOnPath('node', PATH);

describe.skipIf(NODE === undefined)('allowedProgram', () => {
  const evil = mkdtempSync(join(tmpdir(), 'gh-commands-'));
  const fake = join(evil, 'node');
  writeFileSync(fake, '#!/bin/sh\nexit 0\n');
  chmodSync(fake, 0o755);
  afterAll(() => rmSync(evil, { recursive: true, force: true }));

  const refusal = (run: () => unknown) => {
    try {
      run();
    } catch (error) {
      return error as { code: string; details: Record<string, unknown> };
    }
    throw new Error('not refused');
  };

  it("gives the file the child's PATH finds when it is the one the list names", () => {
    expect(allowedProgram('node', ['node'], PATH, PATH)).toBe(NODE);
    expect(allowedProgram('node', ['node'], dirname(NODE as string), PATH)).toBe(NODE);
    expect(allowedProgram(NODE as string, ['node'], evil, PATH)).toBe(NODE);
  });

  it("refuses a child's PATH that makes an allowed name another file", () => {
    const refused = refusal(() => allowedProgram('node', ['node'], `${evil}:${PATH}`, PATH));
    expect(refused.code).toBe('stdio.command_not_allowed');
    expect(refused.details.program).toBe(fake);
  });

  it('lets the PATH pick a file the list names by its absolute path, and nothing else', () => {
    expect(allowedProgram('node', ['node', fake], evil, PATH)).toBe(fake);
    expect(refusal(() => allowedProgram('bash', ['node'], PATH, PATH)).code).toBe('stdio.command_not_allowed');
  });

  it('leaves a command found nowhere on the PATH to the spawn, which reports it missing', () => {
    expect(allowedProgram('node', ['node'], join(evil, 'empty'), PATH)).toBeUndefined();
  });
});
