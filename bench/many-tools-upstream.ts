/**
 * Many MCP servers in one process, for the hub's aggregate `tools/list` benchmark: `--servers` (50)
 * endpoints on one loopback port, `http://127.0.0.1:PORT/u/NN/mcp`, each an SDK server
 * (`createMcpHandler`, both eras) with `--tools` (100) tools of its own — distinct names, titles,
 * descriptions and a three-parameter input schema, about the size of a typical real tool definition.
 *
 *   node --import tsx bench/many-tools-upstream.ts [--servers 50] [--tools 100]
 *
 * Prints one JSON line `{"urls": [...], "pid"}`; stops on SIGTERM or SIGINT.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import * as z from 'zod';

const { values } = parseArgs({
  options: { servers: { type: 'string', default: '50' }, tools: { type: 'string', default: '100' } },
});
const serverCount = Math.min(Math.max(Number(values.servers), 1), 500);
const toolCount = Math.min(Math.max(Number(values.tools), 1), 1000);
const pad = (n: number, width: number) => String(n).padStart(width, '0');

function buildServer(s: number): McpServer {
  const server = new McpServer({ name: `many-${pad(s, 2)}`, version: '1.0.0' });
  for (let t = 0; t < toolCount; t++) {
    server.registerTool(
      `tool_${pad(t, 3)}`,
      {
        title: `Tool ${t} of server ${s}`,
        description:
          `Operation ${t} of the benchmark server ${s}: looks up the record named by \`key\`, applies the ` +
          'requested change when `mode` is "write", and returns a short text summary of what it did.',
        inputSchema: z.object({
          key: z.string().max(200).describe('The record to act on.'),
          mode: z.enum(['read', 'write']).default('read').describe('Read only, or apply the change.'),
          limit: z.number().int().min(1).max(100).optional().describe('At most this many items in the summary.'),
        }),
        annotations: { readOnlyHint: t % 2 === 0 },
      },
      async ({ key }) => ({ content: [{ type: 'text', text: `tool ${t} on ${key}` }] }),
    );
  }
  return server;
}

const handlers = Array.from({ length: serverCount }, (_, s) => createMcpHandler(() => buildServer(s)));
const nodeHandlers = handlers.map((h) => toNodeHandler(h));
const route = /^\/u\/(\d+)\/mcp(?:\?|$)/;

const httpServer = http.createServer((req, res) => {
  const match = route.exec(req.url ?? '');
  const handler = match ? nodeHandlers[Number(match[1])] : undefined;
  if (!handler) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('no such server');
    return;
  }
  handler(req, res).catch(() => {
    if (!res.headersSent) res.writeHead(500).end();
    else res.destroy();
  });
});

await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
const { port } = httpServer.address() as AddressInfo;
const urls = Array.from({ length: serverCount }, (_, s) => `http://127.0.0.1:${port}/u/${pad(s, 2)}/mcp`);
process.stdout.write(`${JSON.stringify({ urls, pid: process.pid })}\n`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  setTimeout(() => process.exit(1), 3_000).unref();
  await Promise.allSettled(handlers.map((h) => h.close()));
  httpServer.closeAllConnections();
  httpServer.close(() => process.exit(0));
};
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
