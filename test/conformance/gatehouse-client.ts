/**
 * Gatehouse as the client under test for the conformance suite's client scenarios (`conformance client
 * --command …`): the suite starts a scenario's MCP server (and, for `auth/*`, its authorization server) and runs
 * this file with the server's URL as the last argument, the scenario's name in `MCP_CONFORMANCE_SCENARIO` and
 * its data (pre-registered credentials) in `MCP_CONFORMANCE_CONTEXT`.
 *
 * It does what an operator and an agent would: starts a real gateway (temporary SQLite store), installs the URL
 * as a `shared` OAuth server (the pre-registered client when the scenario gives one), lets the handshake meet the
 * 401, asks `POST …/auth/connect` for the connect link, opens it as a person would in a browser signed in to the
 * dashboard with the same token (Gatehouse binds that browser and sends it on; the suite's authorization server
 * consents at once), delivers the redirect to Gatehouse's `/oauth/callback` in that browser, and then calls the server's
 * tools through `/mcp/s/{id}` as an agent. A step-up (403 `insufficient_scope`) is met the way an operator meets
 * it: connect again, then call again. Every outbound request is Gatehouse's own; this file only drives it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { loadConfig } from '../../src/config.js';
import { createGateway } from '../../src/gateway.js';

/**
 * Where the authorization server sends the person back; delivered to the gateway by this driver. https, so that
 * Gatehouse publishes its Client ID Metadata Document and offers it where the authorization server takes one.
 */
const PUBLIC_URL = 'https://127.0.0.1:7';
const ID = 'conformance';

const serverUrl = process.argv.at(-1) ?? '';
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
/** Only the authorization scenarios' servers want OAuth; the others are installed as they are. */
const withOAuth = scenario.startsWith('auth/');
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}') as {
  client_id?: string;
  client_secret?: string;
};
/** Arguments a schema requires, each a plain value of its type (what a scenario's tool checks is their types). */
function argumentsFor(inputSchema: object) {
  const schema = inputSchema as { properties?: Record<string, { type?: unknown } | undefined>; required?: string[] };
  const sample: Record<string, unknown> = { number: 1, integer: 1, string: 'conformance', boolean: true };
  return Object.fromEntries(
    (schema.required ?? []).map((name) => {
      const type = schema.properties?.[name]?.type;
      return [name, typeof type === 'string' && type in sample ? sample[type] : null];
    }),
  );
}

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-conformance-client-'));
const admin = `gh_conf_${randomBytes(24).toString('hex')}`;
const log = (line: string) => process.stderr.write(`gatehouse-client: ${line}\n`);

const config = loadConfig({
  env: {
    GATEHOUSE_DATA_DIR: dataDir,
    GATEHOUSE_ADMIN_TOKEN: admin,
    GATEHOUSE_SECRET_KEY: 'c0'.repeat(32),
    GATEHOUSE_HOST: '127.0.0.1',
    GATEHOUSE_PORT: '0',
    GATEHOUSE_PUBLIC_URL: PUBLIC_URL,
    GATEHOUSE_LOG_LEVEL: 'warn',
    GATEHOUSE_LIST_WATCH: 'false',
  },
});
const gateway = await createGateway(config);
let exitCode = 1;
try {
  await gateway.app.listen({ host: '127.0.0.1', port: 0 });
  const address = gateway.app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  const base = `http://127.0.0.1:${address.port}`;

  const rest = async (method: string, route: string, body?: unknown, token: string | null = admin) => {
    const response = await fetch(`${base}${route}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(20_000),
    });
    const text = await response.text();
    log(`${method} ${route} → ${response.status} ${text.slice(0, 300)}`);
    return { status: response.status, json: () => JSON.parse(text) as Record<string, unknown> };
  };

  /** The operator's browser: its cookies (the dashboard session, each flow's binding), kept by hand. */
  const jar = new Map<string, string>();
  const browse = async (url: string, init: RequestInit = {}) => {
    const target = new URL(url);
    const response = await fetch(`${base}${target.pathname}${target.search}`, {
      ...init,
      redirect: 'manual',
      headers: {
        ...(init.headers as Record<string, string>),
        cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '),
      },
      signal: AbortSignal.timeout(20_000),
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      if (at > 0) jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    log(`${init.method ?? 'GET'} ${target.pathname} (browser) → ${response.status}`);
    return response;
  };

  /** The person's part: open the connect link, follow the authorization server back to Gatehouse's callback. */
  const connect = async () => {
    const started = await rest('POST', `/api/mcp/servers/${ID}/auth/connect`);
    if (started.status !== 200) return false;
    if (!jar.has('gatehouse_session')) {
      await browse(`${PUBLIC_URL}/auth/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: admin }),
      });
    }
    const opened = await browse(String(started.json().authorizationUrl));
    let next = opened.headers.get('location') ?? '';
    if (opened.status !== 302 || !next) throw new Error(`the connect link answered ${opened.status}`);
    for (let hop = 0; hop < 5 && !next.startsWith(PUBLIC_URL); hop++) {
      const answer = await fetch(next, { redirect: 'manual', signal: AbortSignal.timeout(20_000) });
      const location = answer.headers.get('location');
      if (!location) throw new Error(`the authorization server answered ${answer.status} without a redirect`);
      next = new URL(location, next).href;
    }
    return (await browse(next)).status === 200;
  };

  const auth = {
    type: 'oauth',
    mode: 'shared',
    ...(context.client_id ? { clientId: context.client_id } : {}),
    ...(context.client_secret ? { clientSecret: context.client_secret } : {}),
  };
  const installed = await rest('POST', '/api/mcp/install', {
    manifest: {
      id: ID,
      name: ID,
      transport: 'streamable-http',
      url: serverUrl,
      privateNetwork: true,
      ...(withOAuth ? { auth } : {}),
    },
  });
  if (installed.status !== 201) throw new Error('install refused');
  await rest('PATCH', `/api/mcp/servers/${ID}/tools`, { mode: 'all', defaultTier: 'allow' });
  // The handshake meets the 401 and discovers the authorization server; then a person connects.
  if (!(await rest('POST', `/api/mcp/servers/${ID}/test`)).json().ok) {
    if (!(await connect())) throw new Error('connect failed');
    await rest('POST', `/api/mcp/servers/${ID}/test`);
  }

  const agent = String((await rest('POST', '/api/tokens', { role: 'agent', name: 'conformance-agent' })).json().token);
  // The agent answers a form elicitation the upstream relays through Gatehouse by accepting, with the form's
  // defaults filled in (SEP-1034: the client applies them).
  const client = new Client(
    { name: 'conformance-agent', version: '1.0.0' },
    { capabilities: { elicitation: { form: { applyDefaults: true } } } },
  );
  client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: {} }));
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp/s/${ID}`), {
      requestInit: { headers: { authorization: `Bearer ${agent}` } },
    }),
  );
  try {
    const { tools } = await client.listTools();
    log(`tools: ${tools.map((t) => t.name).join(', ')}`);
    for (const tool of tools.filter((t) => !t.name.startsWith('gatehouse__'))) {
      const args = argumentsFor(tool.inputSchema);
      let result = await client.callTool({ name: tool.name, arguments: args });
      // A step-up: the upstream wants a wider scope; Gatehouse asks for it on the next connect.
      if (result.isError && JSON.stringify(result).includes('auth')) {
        log(`call answered ${JSON.stringify(result).slice(0, 300)}; connecting again`);
        if (await connect()) result = await client.callTool({ name: tool.name, arguments: args });
      }
      log(`${tool.name}: ${JSON.stringify(result).slice(0, 300)}`);
    }
  } finally {
    await client.close();
  }
  exitCode = 0;
} catch (error) {
  log(error instanceof Error ? (error.stack ?? error.message) : String(error));
} finally {
  await gateway.app.close().catch(() => {});
  rmSync(dataDir, { recursive: true, force: true });
}
process.exit(exitCode);
