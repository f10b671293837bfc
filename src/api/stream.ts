/**
 * `GET /api/mcp/stream`: Server-Sent Events — `event: <type>`, `id: <n>`
 * (monotonic; send `Last-Event-ID` to resume), `data: <one JSON object>`.
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { EventHub, StreamEvent } from '../audit/stream.js';
import type { Authenticator, Role } from '../identity/index.js';
import { defineRoute, type RouteDeclaration } from './route.js';

/** Who may read the stream, when it opens and for as long as it stays open. */
const STREAM_ACCESS: readonly Role[] = ['admin', 'operator'];

const HEARTBEAT_MS = 15_000;
const RESUME_LIMIT = 1000;

function frame(event: StreamEvent): string {
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify({ ...event.data, at: event.at })}\n\n`;
}

/**
 * `authenticate` identifies the request again (its token, cookie session or OAuth token, as the app does):
 * before every batch of events and every keep-alive, so a stream ends when its reader loses access (logout,
 * a revoked token, a disabled or demoted person) instead of feeding them for as long as it stays open.
 */
export function streamRoutes(events: EventHub, authenticate: Authenticator): RouteDeclaration[] {
  const stillAllowed = async (request: FastifyRequest): Promise<boolean> => {
    try {
      const principal = await authenticate(request);
      return principal !== undefined && STREAM_ACCESS.includes(principal.role);
    } catch {
      return false;
    }
  };

  return [
    defineRoute({
      method: 'GET',
      url: '/api/mcp/stream',
      summary: 'Live event stream (SSE) of server, tool, approval and settings events.',
      scope: 'servers',
      access: STREAM_ACCESS,
      mcp: { exclude: 'a never-ending stream is not a tool call' },
      query: z.strictObject({ lastEventId: z.coerce.number().int().min(0).optional() }),
      async handler({ query, request, reply }) {
        const header = request.headers['last-event-id'];
        const fromHeader = typeof header === 'string' && /^\d+$/.test(header) ? Number(header) : undefined;
        const resumeFrom = fromHeader ?? query.lastEventId;

        reply.hijack();
        const raw = reply.raw;
        raw.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-store',
          connection: 'keep-alive',
          'x-accel-buffering': 'no',
          'x-request-id': request.id,
        });
        raw.write(': gatehouse event stream\n\n');

        // Subscribe first, then replay: an event arriving during the replay is buffered, not lost or doubled.
        let lastSent = resumeFrom ?? 0;
        let replaying = resumeFrom !== undefined;
        const send = (event: StreamEvent) => {
          if (event.id <= lastSent) return;
          raw.write(frame(event));
          lastSent = event.id;
        };
        // Events wait here while the reader's access is checked; one check per batch, in order.
        const queued: StreamEvent[] = [];
        let pumping = false;
        let ended = false;
        const end = () => {
          ended = true;
          raw.end();
        };
        const pump = async () => {
          if (pumping || replaying) return;
          pumping = true;
          try {
            while (queued.length > 0 && !ended) {
              if (!(await stillAllowed(request))) return end();
              for (const event of queued.splice(0)) send(event);
            }
          } finally {
            pumping = false;
          }
        };
        const unsubscribe = events.subscribe((event) => {
          queued.push(event);
          void pump();
        });
        const heartbeat = setInterval(() => {
          void stillAllowed(request).then((allowed) => {
            if (!allowed) end();
            else if (!ended) raw.write(': keep-alive\n\n');
          });
        }, HEARTBEAT_MS);
        heartbeat.unref();
        raw.once('close', () => {
          ended = true;
          clearInterval(heartbeat);
          unsubscribe();
        });

        if (resumeFrom !== undefined) {
          for (const event of await events.since(resumeFrom, RESUME_LIMIT)) send(event);
          replaying = false;
          void pump();
        }
        return reply;
      },
    }),
  ];
}
