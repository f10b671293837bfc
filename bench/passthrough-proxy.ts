/**
 * The floor of the hub benchmark: a bare pass-through HTTP proxy in Node. Every request is forwarded
 * to one upstream over a keep-alive undici pool and its answer streamed back (SSE included); no MCP,
 * no token, no policy, no audit. What it adds over a direct call is the least any Node gateway adds
 * on this machine, so the hub's added latency can be read against it.
 *
 *   node --import tsx bench/passthrough-proxy.ts --upstream http://127.0.0.1:PORT/mcp
 *
 * Prints one JSON line, `{"url", "pid"}`, once listening on 127.0.0.1; stops on SIGTERM or SIGINT.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';

const { values } = parseArgs({ options: { upstream: { type: 'string' } } });
if (!values.upstream) {
  process.stderr.write('usage: passthrough-proxy.ts --upstream URL\n');
  process.exit(2);
}
const upstream = new URL(values.upstream);
const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 256 });
/** Hop-by-hop headers, which a proxy does not forward. */
const HOP = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'content-length', 'upgrade']);

const forwardable = (headers: http.IncomingHttpHeaders | Record<string, string | string[] | undefined>) =>
  Object.fromEntries(
    Object.entries(headers).filter(([name, value]) => value !== undefined && !HOP.has(name)),
  ) as Record<string, string | string[]>;

const server = http.createServer((req, res) => {
  void (async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const answer = await request(upstream, {
      method: (req.method ?? 'GET') as 'GET',
      headers: forwardable(req.headers),
      ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      dispatcher,
    });
    res.writeHead(answer.statusCode, forwardable(answer.headers));
    res.on('close', () => answer.body.destroy());
    for await (const chunk of answer.body) res.write(chunk);
    res.end();
  })().catch(() => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
});
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(
    `${JSON.stringify({ url: `http://127.0.0.1:${port}${upstream.pathname}`, pid: process.pid })}\n`,
  );
});
const stop = () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
  void dispatcher.close();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
