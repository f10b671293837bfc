import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { Command } from 'commander';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalRoutes } from '../../src/api/approvals.js';
import { buildApp } from '../../src/app.js';
import { ApprovalQueue } from '../../src/approvals/queue.js';
import { addApprovalCommands, printable } from '../../src/cli/approvals.js';
import type { Principal } from '../../src/identity/index.js';
import { tokenAuthenticator } from '../../src/identity/index.js';
import { createLogger } from '../../src/logging.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';
import { hubRequest, RecordingExecutor } from './helpers.js';

/** Runs `gatehouse approvals …` in-process against a real listening gateway, capturing output and exit code. */
async function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
  let stdout = '';
  let stderr = '';
  let exitCode = 0;
  const program = new Command('gatehouse').exitOverride();
  addApprovalCommands(program, {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    env,
    setExitCode: (code) => {
      exitCode = code;
    },
  });
  await program.parseAsync(['node', 'gatehouse', 'approvals', ...args]);
  return { stdout, stderr, exitCode };
}

describe('gatehouse approvals (CLI over REST)', () => {
  let gw: TestGateway;
  let app: FastifyInstance;
  let queue: ApprovalQueue;
  let executor: RecordingExecutor;
  let url: string;
  let operatorToken: string;
  let agentToken: string;
  let agent: Principal;
  let silent: Server;
  const sockets = new Set<Socket>();
  let silentUrl: string;

  let redirectServer: HttpServer;
  let redirectUrl: string;
  let redirectTargetHits = 0;

  beforeAll(async () => {
    // Answers every request with a redirect to a path that counts hits.
    redirectServer = createHttpServer((req, res) => {
      if (req.url?.startsWith('/elsewhere')) {
        redirectTargetHits++;
        res.end('{}');
        return;
      }
      res.writeHead(302, { location: '/elsewhere' }).end();
    });
    await new Promise<void>((resolve) => redirectServer.listen(0, '127.0.0.1', resolve));
    const redirectAddress = redirectServer.address();
    redirectUrl = `http://127.0.0.1:${typeof redirectAddress === 'object' && redirectAddress ? redirectAddress.port : 0}`;
    gw = await startTestGateway(sqliteTarget);
    const { store, audit, events, tokens } = gw.gateway;
    queue = new ApprovalQueue({ store, audit, events });
    executor = new RecordingExecutor();
    queue.registerExecutor('hub', executor);
    app = await buildApp({
      config: { maxBodySize: 1 << 20 },
      logger: createLogger({ logLevel: 'silent' }),
      authenticate: tokenAuthenticator(store, tokens),
      routes: approvalRoutes({ queue }),
    });
    url = await app.listen({ host: '127.0.0.1', port: 0 });
    operatorToken = (await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'alice' } })).json()
      .token;
    const agentBody = (await gw.request('POST', '/api/tokens', { body: { role: 'agent', name: 'claude' } })).json();
    agentToken = agentBody.token;
    agent = { id: agentBody.id, name: agentBody.name, role: 'agent', groups: agentBody.groups };
    // Accepts connections and never answers: for the deadline.
    silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address();
    silentUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  afterAll(async () => {
    await queue.close();
    await app.close();
    await gw.close();
    redirectServer.closeAllConnections();
    await new Promise<void>((resolve) => redirectServer.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('lists, shows and approves; the call runs once', async () => {
    const created = await queue.create(
      hubRequest({ requester: agent, arguments: { path: 'invoice\u202Etxt.exe', note: 'line\u001b[2Jclear' } }),
    );
    const list = await cli(['list', '--url', url, '--token', operatorToken]);
    expect(list.exitCode).toBe(0);
    expect(list.stdout).toContain(`${created.id}\tpending\thub\tclaude\tfiles__write_file`);
    expect(list.stdout).toContain('1 of 1');

    const json = await cli(['list', '--status', 'pending', '--json'], {
      GATEHOUSE_URL: url,
      GATEHOUSE_CLI_TOKEN: operatorToken,
    });
    expect(JSON.parse(json.stdout)).toMatchObject({ count: 1, total: 1, approvals: [{ id: created.id }] });

    const show = await cli(['show', created.id, '--url', url, '--token', operatorToken]);
    expect(show.exitCode).toBe(0);
    expect(show.stdout).toContain('requester:  claude');
    expect(show.stdout).toContain('arguments (exactly as they will be sent):');
    // Invisible and control characters reach the terminal as visible escapes, never raw.
    expect(show.stdout).toContain('invoice\\u{202e}txt.exe');
    expect(show.stdout).not.toContain('\u202E');
    expect(show.stdout).not.toContain('\u001b');

    const approve = await cli(['approve', created.id, '--reason', 'fine', '--url', url, '--token', operatorToken]);
    expect(approve).toMatchObject({ exitCode: 0, stderr: '' });
    expect(approve.stdout).toContain(`approved ${created.id}`);
    await queue.idle();
    expect(executor.calls.map((c) => c.id)).toEqual([created.id]);
    const after = await cli(['show', created.id, '--json', '--url', url, '--token', operatorToken]);
    expect(JSON.parse(after.stdout)).toMatchObject({ status: 'executed', reason: 'fine' });

    const again = await cli(['approve', created.id, '--url', url, '--token', operatorToken]);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toMatch(/^approval\.not_pending: Approval apr_\S+ is already executed\.\n$/);
    expect(executor.calls).toHaveLength(1);
  });

  it('rejects with a reason', async () => {
    const created = await queue.create(hubRequest({ requester: agent }));
    const reject = await cli(['reject', created.id, '--reason', 'no', '--url', url, '--token', operatorToken]);
    expect(reject).toMatchObject({ exitCode: 0, stdout: `rejected ${created.id}\n` });
    expect(await queue.status(created.id, agent)).toMatchObject({ status: 'rejected', reason: 'no' });
  });

  it('prints typed errors as code: message with a non-zero exit', async () => {
    const created = await queue.create(hubRequest({ requester: agent }));
    const asAgent = await cli(['approve', created.id, '--url', url, '--token', agentToken]);
    expect(asAgent).toMatchObject({ exitCode: 1, stdout: '' });
    expect(asAgent.stderr).toMatch(/^forbidden: /);

    const missing = await cli(['show', 'apr_missing', '--url', url, '--token', operatorToken]);
    expect(missing.stderr).toMatch(/^approval\.not_found: /);
    expect(missing.exitCode).toBe(1);

    const noToken = await cli(['list', '--url', url]);
    expect(noToken).toMatchObject({ exitCode: 1 });
    expect(noToken.stderr).toMatch(/^unauthorized: .*GATEHOUSE_CLI_TOKEN/);

    const badToken = await cli(['list', '--url', url, '--token', 'gh_wrong']);
    expect(badToken.stderr).toMatch(/^unauthorized: /);

    const badStatus = await cli(['list', '--status', 'done', '--url', url, '--token', operatorToken]);
    expect(badStatus.stderr).toMatch(/^validation_error: /);

    // A port that was free a moment ago: nothing listens there.
    const closedPort = await new Promise<number>((resolve) => {
      const probe = createServer();
      probe.listen(0, '127.0.0.1', () => {
        const address = probe.address();
        probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    const down = await cli(['list', '--url', `http://127.0.0.1:${closedPort}`, '--token', operatorToken]);
    expect(down.exitCode).toBe(1);
    expect(down.stderr).toMatch(
      /^upstream_unreachable: Cannot reach the gateway at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/,
    );

    // A redirect is refused, not followed (the token must not travel anywhere else).
    const redirected = await cli(['list', '--url', redirectUrl, '--token', operatorToken]);
    expect(redirected.exitCode).toBe(1);
    expect(redirected.stderr).toMatch(/^upstream_protocol_error: .*redirect \(HTTP 302\)/);
    expect(redirectTargetHits).toBe(0);

    const started = Date.now();
    const hung = await cli(['list', '--url', silentUrl, '--token', operatorToken, '--timeout', '300']);
    expect(hung.exitCode).toBe(1);
    expect(hung.stderr).toMatch(/^upstream_timeout: .*300 ms/);
    expect(Date.now() - started).toBeLessThan(5000);
    expect((await queue.get(created.id)).status).toBe('pending');
  });

  it('makes terminal-unsafe characters visible', () => {
    expect(printable('a\u200Bb\u202Ec\u0007d\ttab\nline')).toBe('a\\u{200b}b\\u{202e}c\\u{7}d\ttab\nline');
    expect(printable(`x${String.fromCodePoint(0xe0041)}`)).toBe('x\\u{e0041}');
  });
});
