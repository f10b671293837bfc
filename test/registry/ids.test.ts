import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assertServerId, deriveServerId, SERVER_ID_PATTERN, serverIdSchema } from '../../src/registry/ids.js';
import { thrown } from './helpers.js';

describe('deriveServerId', () => {
  it.each([
    ['io.github.owner/server', 'server'],
    ['io.github.modelcontextprotocol/sequential-thinking', 'sequential-thinking'],
    ['@modelcontextprotocol/server-filesystem', 'server-filesystem'],
    ['My Server', 'my-server'],
    ['--Hello__World--', 'hello-world'],
    ['mcp.example.com', 'mcp-example-com'],
    ['https://example.com/mcp', 'mcp'],
    ['a/b/c/Weather API v2', 'weather-api-v2'],
    // Unicode: every run of characters outside [a-z0-9] becomes one '-'.
    ['Café—Ünïcode 服务器 v2', 'caf-n-code-v2'],
    ['ÉCOLE', 'cole'],
    ['server 🚀 one', 'server-one'],
    // Long names are cut to 32, and a '-' left at the cut is trimmed.
    ['a'.repeat(40), 'a'.repeat(32)],
    [`${'x'.repeat(31)}-yyyy`, 'x'.repeat(31)],
    [`${'x'.repeat(30)}--!!yyyy`, `${'x'.repeat(30)}-y`],
    ['GATEHOUSE-proxy', 'gatehouse-proxy'],
  ])('%j → %s', (name, id) => {
    expect(deriveServerId(name)).toBe(id);
  });

  it.each([
    ['gatehouse', /reserved/],
    ['io.github.someone/GateHouse', /reserved/],
    ['!!!', /explicitly/],
    ['', /explicitly/],
    ['owner/', /explicitly/],
    ['服务器', /explicitly/],
    ['__--__', /explicitly/],
  ])('%j is refused', (name, message) => {
    const error = thrown(() => deriveServerId(name));
    expect(error.code).toBe('validation_error');
    expect(error.message).toMatch(message);
    expect(error.details?.issues).toEqual([expect.objectContaining({ path: 'id' })]);
  });

  it('always yields a valid id or refuses with validation_error', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 80 }), (name) => {
        let id: string;
        try {
          id = deriveServerId(name);
        } catch (err) {
          expect((err as { code?: string }).code).toBe('validation_error');
          return;
        }
        expect(id).toMatch(SERVER_ID_PATTERN);
        expect(id).not.toMatch(/-$/);
        expect(id).not.toBe('gatehouse');
      }),
      { numRuns: 500 },
    );
  });
});

describe('assertServerId and serverIdSchema', () => {
  const valid = ['a', '0', 'a-b', 'a--b', 'x'.repeat(32), 'github', '9lives'];
  const invalid = ['', '-a', 'A', 'a_b', 'a.b', 'a b', 'x'.repeat(33), 'gatehouse', 'é'];

  it.each(valid)('accepts %j', (id) => {
    expect(assertServerId(id)).toBe(id);
    expect(serverIdSchema.safeParse(id).success).toBe(true);
  });

  it.each(invalid)('refuses %j', (id) => {
    expect(thrown(() => assertServerId(id)).code).toBe('validation_error');
    expect(serverIdSchema.safeParse(id).success).toBe(false);
  });
});
