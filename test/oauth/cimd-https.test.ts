/**
 * Client ID Metadata Documents over https, the way they are served in production: a CA made in the test
 * with openssl signs the document server's certificate, and a real `gatehouse serve` process (plain
 * http not allowed) trusts that CA through `NODE_EXTRA_CA_CERTS` only. The gateway fetches the document
 * over verified TLS through its egress guard and shows the consent page; the same document behind a
 * certificate from a CA it does not trust is refused after the TLS handshake fails; https documents on a
 * loopback address (as an IP literal, or a name that resolves to one) are refused by the guard before
 * any connection is made, valid certificate or not; an http client_id is no document at all.
 */
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PUBLIC_TEST_HOST, TEST_ADMIN_TOKEN, TEST_SECRET_KEY } from '../helpers/gateway.js';
import { pkce } from '../helpers/oauth.js';
import { NODE_TS } from '../helpers/processes.js';

const GATEWAY = new URL('../helpers/gateway-process.ts', import.meta.url).pathname;
const REDIRECT = 'http://127.0.0.1:7777/cb';

/** A CA (key and certificate) and a server certificate it signs for `names`, made with openssl in `dir`. */
function makeCa(dir: string, label: string, names: string) {
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  const path = (file: string) => join(dir, `${label}-${file}`);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl([
    'req',
    '-x509',
    ...ec,
    '-keyout',
    path('ca.key'),
    '-out',
    path('ca.pem'),
    '-days',
    '1',
    '-subj',
    `/CN=Gatehouse test CA ${label}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  openssl(['req', ...ec, '-keyout', path('leaf.key'), '-out', path('leaf.csr'), '-subj', '/CN=doc']);
  writeFileSync(
    path('ext.cnf'),
    `subjectAltName=${names}\nextendedKeyUsage=serverAuth\nbasicConstraints=critical,CA:FALSE\n`,
  );
  openssl([
    'x509',
    '-req',
    '-in',
    path('leaf.csr'),
    '-CA',
    path('ca.pem'),
    '-CAkey',
    path('ca.key'),
    '-CAcreateserial',
    '-out',
    path('leaf.pem'),
    '-days',
    '1',
    '-extfile',
    path('ext.cnf'),
  ]);
  return { ca: path('ca.pem'), key: readFileSync(path('leaf.key')), cert: readFileSync(path('leaf.pem')) };
}

interface DocumentServer {
  origin: string;
  /** TCP connections accepted, TLS handshakes that failed, documents served. */
  seen: { connections: number; tlsErrors: number; requests: number };
  close(): Promise<void>;
}

/** An https server answering every path with the client metadata document whose client_id is that URL. */
async function documentServer(
  host: string,
  tls: { key: Buffer; cert: Buffer },
  originHost = host,
): Promise<DocumentServer> {
  const seen = { connections: 0, tlsErrors: 0, requests: 0 };
  let origin = '';
  const server = https.createServer(tls, (req, res) => {
    seen.requests++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ client_id: `${origin}${req.url}`, client_name: 'TLS client', redirect_uris: [REDIRECT] }));
  });
  server.on('connection', () => seen.connections++);
  server.on('tlsClientError', () => seen.tlsErrors++);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  origin = `https://${originHost}:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('Client ID Metadata Documents over https with a local CA', () => {
  let dir: string;
  let child: ChildProcessWithoutNullStreams | undefined;
  let gateway: string;
  let trusted: DocumentServer;
  let untrusted: DocumentServer;
  let loopback: DocumentServer;
  let named: DocumentServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-cimd-tls-'));
    const good = makeCa(dir, 'trusted', 'IP:127.0.0.2,IP:127.0.0.1,DNS:localhost');
    const rogue = makeCa(dir, 'rogue', 'IP:127.0.0.2');
    trusted = await documentServer(PUBLIC_TEST_HOST, good);
    untrusted = await documentServer(PUBLIC_TEST_HOST, rogue);
    loopback = await documentServer('127.0.0.1', good);
    named = await documentServer('127.0.0.1', good, 'localhost');

    const [node, ...flags] = NODE_TS;
    child = spawn(node, [...flags, GATEWAY], {
      env: {
        ...process.env,
        NODE_ENV: 'test',
        // The only trust the gateway is given for the test CA: the variable Node reads at start.
        NODE_EXTRA_CA_CERTS: good.ca,
        GATEHOUSE_DATA_DIR: join(dir, 'data'),
        GATEHOUSE_SECRET_KEY: TEST_SECRET_KEY,
        GATEHOUSE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
        GATEHOUSE_ALLOW_HTTP: 'false',
        GATEHOUSE_TEST_PUBLIC_ADDRESSES: PUBLIC_TEST_HOST,
        GATEHOUSE_LOG_LEVEL: 'warn',
        GATEHOUSE_LIST_WATCH: 'false',
      },
    });
    const started = child;
    let stderr = '';
    started.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    gateway = await new Promise<string>((resolve, reject) => {
      let buffer = '';
      started.on('exit', (code, signal) => reject(new Error(`gateway exited (${code ?? signal})\n${stderr}`)));
      started.stdout.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        const line = buffer.split('\n').find((l) => l.startsWith('{'));
        if (line) resolve((JSON.parse(line) as { url: string }).url);
      });
    });
  }, 60_000);

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((resolve) => child?.once('exit', resolve));
      child.kill('SIGKILL');
      await gone;
    }
    await Promise.all([trusted, untrusted, loopback, named].filter(Boolean).map((s) => s.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  const authorize = (clientId: string) =>
    fetch(
      `${gateway}/authorize?${new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: REDIRECT,
        code_challenge: pkce().challenge,
        code_challenge_method: 'S256',
        state: 's',
        resource: `${gateway}/mcp`,
      })}`,
      { redirect: 'manual' },
    );

  it('fetches a document over TLS verified against the CA given in NODE_EXTRA_CA_CERTS', async () => {
    const page = await authorize(`${trusted.origin}/client.json`);
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(html).toContain('TLS client');
    expect(html).toContain(`<code>${new URL(trusted.origin).host}</code>`);
    expect(trusted.seen).toMatchObject({ requests: 1, tlsErrors: 0 });
  });

  it('refuses the same document behind a certificate from a CA it does not trust', async () => {
    const answer = await authorize(`${untrusted.origin}/client.json`);
    expect(answer.status).toBe(400);
    expect(await answer.json()).toMatchObject({
      error: 'invalid_client',
      error_description: 'The client metadata document could not be fetched.',
    });
    // The gateway connected and gave up in the handshake: no document left the server.
    expect(untrusted.seen.connections).toBeGreaterThanOrEqual(1);
    expect(untrusted.seen.requests).toBe(0);
  });

  it('refuses https documents on loopback before connecting, valid certificate or not', async () => {
    for (const server of [loopback, named]) {
      const answer = await authorize(`${server.origin}/client.json`);
      expect(answer.status).toBe(400);
      expect(await answer.json()).toMatchObject({
        error: 'invalid_client',
        error_description: 'The client metadata document is on a private or loopback address.',
      });
      expect(server.seen).toEqual({ connections: 0, tlsErrors: 0, requests: 0 });
    }
  });

  it('takes no http client_id for a document where plain http is not allowed', async () => {
    const before = trusted.seen.requests;
    const answer = await authorize(`http://${PUBLIC_TEST_HOST}:${new URL(trusted.origin).port}/client.json`);
    expect(answer.status).toBe(400);
    expect((await answer.json()).error).toBe('invalid_client');
    expect(trusted.seen.requests).toBe(before);
  });
});
