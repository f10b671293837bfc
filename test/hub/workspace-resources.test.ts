/**
 * A server's workspace roots bound what an agent hands it outside tool arguments too: a `file:` resource URI
 * (read or subscribed), a prompt's path arguments, a completion's. Refused before the upstream sees them, as
 * tool arguments are (`hub.test.ts`). A real gateway on loopback, an SDK-built upstream on 127.0.0.2, SDK
 * clients of both eras as agents.
 */
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Client } from '@modelcontextprotocol/client';
import { completable, type McpServer, ProtocolError, ResourceTemplate } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { wrapResourceUri } from '../../src/surfaces/hub/names.js';
import { type McpFixture, startModernServer } from '../fixtures/mcp-servers.js';
import { connectAgent, type Era } from '../helpers/agents.js';
import { PUBLIC_TEST_HOST, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

const root = mkdtempSync(join(tmpdir(), 'gh-ws-root-'));
const outside = mkdtempSync(join(tmpdir(), 'gh-ws-outside-'));
writeFileSync(join(root, 'a.txt'), 'inside');
writeFileSync(join(outside, 'secret.txt'), 'outside');
symlinkSync(outside, join(root, 'escape'));

const fileUri = (path: string) => pathToFileURL(path).href;
const INSIDE = fileUri(join(root, 'a.txt'));
const ESCAPES = [
  fileUri(join(outside, 'secret.txt')),
  'file:///etc/passwd',
  fileUri(join(root, 'escape', 'secret.txt')),
];

/** A files server: any `file:` URI readable, a prompt and a template whose arguments are paths. */
function register(server: McpServer): void {
  server.registerResource(
    'file',
    new ResourceTemplate('file:///{+path}', { list: undefined, complete: { path: (value) => [`${value}x`] } }),
    {},
    async (uri) => ({ contents: [{ uri: uri.href, text: `read ${uri.href}` }] }),
  );
  server.registerPrompt(
    'summarize',
    { argsSchema: z.object({ path: completable(z.string(), (value) => [`${value}.md`]) }) },
    ({ path }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Summarize ${path}.` } }] }),
  );
}

/** The protocol error a request failed with (a request that succeeds fails the test). */
async function refusal(request: Promise<unknown>): Promise<ProtocolError> {
  const error = await request.then(
    (result) => {
      throw new Error(`expected a refusal, got ${JSON.stringify(result)}`);
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProtocolError);
  return error as ProtocolError;
}

describe('the workspace roots bound resources, prompts and completions', { timeout: 60_000 }, () => {
  let gw: TestGateway;
  let upstream: McpFixture;
  let base: string;
  let token: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    gw = await startTestGateway(sqliteTarget);
    upstream = await startModernServer({
      host: PUBLIC_TEST_HOST,
      tools: ['echo'],
      register,
      serverOptions: { capabilities: { resources: { subscribe: true } } },
    });
    expect(
      (await gw.request('POST', '/api/mcp/install', { body: { url: upstream.url, id: 'files' } })).statusCode,
    ).toBe(201);
    const set = await gw.request('PATCH', '/api/mcp/servers/files/config', { body: { workspaceRoots: [root] } });
    expect(set.statusCode).toBe(200);
    expect((await gw.request('POST', '/api/mcp/servers/files/test')).json().ok).toBe(true);
    token = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'agent' } })).json().token;
    base = await gw.listen();
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await upstream.close();
    await gw.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  const connect = async (path: string, era: Era) => {
    const client = await connectAgent(`${base}${path}`, token, { era });
    clients.push(client);
    return client;
  };

  const upstreamCount = () =>
    upstream.log.count('resources/read') +
    upstream.log.count('prompts/get') +
    upstream.log.count('completion/complete');

  const expectEscape = async (request: Promise<unknown>) => {
    const error = await refusal(request);
    expect(error.code).toBe(-32602);
    expect(error.data).toEqual({ code: 'policy.path_escape' });
  };

  for (const era of ['modern', 'legacy'] as const) {
    it(`reads only inside the roots on /mcp/s/{id} and /mcp (${era} agent)`, async () => {
      const single = await connect('/mcp/s/files', era);
      const aggregate = await connect('/mcp', era);
      expect((await single.readResource({ uri: INSIDE })).contents).toEqual([{ uri: INSIDE, text: `read ${INSIDE}` }]);
      const wrapped = wrapResourceUri('files', INSIDE);
      expect((await aggregate.readResource({ uri: wrapped })).contents[0]?.uri).toBe(wrapped);

      const before = upstreamCount();
      for (const uri of ESCAPES) {
        await expectEscape(single.readResource({ uri }));
        await expectEscape(aggregate.readResource({ uri: wrapResourceUri('files', uri) }));
      }
      expect(upstreamCount()).toBe(before);
    });
  }

  it('subscribes only inside the roots: a 2025 session is refused, a listen stream leaves the URI out', async () => {
    const legacy = await connect('/mcp/s/files', 'legacy');
    await legacy.subscribeResource({ uri: INSIDE });
    for (const uri of ESCAPES) await expectEscape(legacy.subscribeResource({ uri }));

    const modern = await connect('/mcp/s/files', 'modern');
    const stream = await modern.listen({ resourceSubscriptions: [INSIDE, ...ESCAPES] });
    expect(stream.honoredFilter.resourceSubscriptions).toEqual([INSIDE]);
    await stream.close();
  });

  it('checks a prompt’s path arguments and a completion’s, as a tool’s', async () => {
    const agent = await connect('/mcp/s/files', 'modern');
    const inside = join(root, 'a.txt');
    const got = await agent.getPrompt({ name: 'summarize', arguments: { path: inside } });
    expect(got.messages[0]?.content).toEqual({ type: 'text', text: `Summarize ${inside}.` });
    const completed = await agent.complete({
      ref: { type: 'ref/prompt', name: 'summarize' },
      argument: { name: 'path', value: join(root, 'a') },
    });
    expect(completed.completion.values).toEqual([`${join(root, 'a')}.md`]);

    const before = upstreamCount();
    await expectEscape(agent.getPrompt({ name: 'summarize', arguments: { path: '/etc/passwd' } }));
    await expectEscape(agent.getPrompt({ name: 'summarize', arguments: { path: join(root, 'escape', 'x') } }));
    await expectEscape(
      agent.complete({ ref: { type: 'ref/prompt', name: 'summarize' }, argument: { name: 'path', value: '/etc/pa' } }),
    );
    await expectEscape(
      agent.complete({
        ref: { type: 'ref/prompt', name: 'summarize' },
        argument: { name: 'path', value: join(root, 'a') },
        context: { arguments: { path: '/etc/passwd' } },
      }),
    );
    // An HTTP upstream resolves a relative path from a directory Gatehouse does not set.
    const relative = await refusal(agent.getPrompt({ name: 'summarize', arguments: { path: 'notes.txt' } }));
    expect(relative.data).toEqual({ code: 'policy.relative_path' });
    expect(upstreamCount()).toBe(before);
  });

  it('lets a template’s variables through (pieces of a URI, not paths), but not a file: URI among them', async () => {
    const agent = await connect('/mcp/s/files', 'modern');
    const ref = { type: 'ref/resource' as const, uri: 'file:///{+path}' };
    // The first keystroke and a relative piece are the template's business.
    expect((await agent.complete({ ref, argument: { name: 'path', value: '' } })).completion.values).toEqual(['x']);
    expect((await agent.complete({ ref, argument: { name: 'path', value: 'docs' } })).completion.values).toEqual([
      'docsx',
    ]);
    await expectEscape(agent.complete({ ref, argument: { name: 'path', value: 'file:///etc/passwd' } }));
  });
});
