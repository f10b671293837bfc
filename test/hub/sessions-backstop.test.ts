/**
 * The gateway-wide backstop on 2025-era sessions: when it is full, a token with sessions of its own gives
 * up its oldest, and a token with none is refused with `session_limit` — another token's live session is
 * never closed for it. `LegacySessions` with a real SDK server per session.
 */
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { LegacySessions } from '../../src/surfaces/sessions.js';

const LEGACY = '2025-06-18';

describe('session backstop', () => {
  let sessions: LegacySessions | undefined;
  afterEach(async () => {
    await sessions?.close();
  });

  it('refuses a token with no session once the backstop is full, and never evicts another token’s', async () => {
    let evictions = 0;
    const live = new LegacySessions({
      idleMs: 60_000,
      maxSessions: 2,
      maxRequestBodySize: 1_000_000,
      onEvicted: () => evictions++,
    });
    sessions = live;
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'a', version: '1' } },
    };
    const open = async (tokenId: string) => {
      const request = new Request('http://127.0.0.1/mcp', {
        method: 'POST',
        headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
        body: JSON.stringify(initialize),
      });
      const answer = await live.handle(
        request,
        { authInfo: { token: 't', clientId: tokenId, scopes: [] }, parsedBody: initialize },
        `${tokenId}|*`,
        () => new McpServer({ name: 'test', version: '1.0.0' }).server,
        { tokenId, admit: async () => ({ maxPerToken: 100 }) },
      );
      return { status: answer.status, id: answer.headers.get('mcp-session-id'), body: await answer.text() };
    };
    const a1 = await open('a');
    const b1 = await open('b');
    expect([a1.status, b1.status]).toEqual([200, 200]);
    const refused = await open('c');
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { data: { code: 'session_limit' } } });
    expect([live.countOf('a'), live.countOf('b'), live.countOf('c')]).toEqual([1, 1, 0]);
    // A token that holds a session makes room from its own.
    const a2 = await open('a');
    expect(a2.status).toBe(200);
    expect([live.countOf('a'), live.countOf('b')]).toEqual([1, 1]);
    const build = () => new McpServer({ name: 'test', version: '1.0.0' }).server;
    expect(await live.find(a1.id as string, 'a|*', build)).toBeUndefined();
    expect(await live.find(b1.id as string, 'b|*', build)).toBeDefined();
    expect(evictions).toBe(1);
  });
});
