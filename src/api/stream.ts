/**
 * `GET /api/mcp/stream`: Server-Sent Events — `event: <type>`, `id: <n>`
 * (monotonic; send `Last-Event-ID` to resume), `data: <one JSON object>`.
 */
import { z } from 'zod';
import type { EventHub, StreamEvent } from '../audit/stream.js';
import { defineRoute, type RouteDeclaration } from './route.js';

const HEARTBEAT_MS = 15_000;
const RESUME_LIMIT = 1000;

function frame(event: StreamEvent): string {
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify({ ...event.data, at: event.at })}\n\n`;
}

export function streamRoutes(events: EventHub): RouteDeclaration[] {
  return [
    defineRoute({
      method: 'GET',
      url: '/api/mcp/stream',
      summary: 'Live event stream (SSE) of server, tool, approval and settings events.',
      scope: 'servers',
      access: ['admin', 'operator'],
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
        const buffered: StreamEvent[] = [];
        let replaying = resumeFrom !== undefined;
        const send = (event: StreamEvent) => {
          if (event.id <= lastSent) return;
          raw.write(frame(event));
          lastSent = event.id;
        };
        const unsubscribe = events.subscribe((event) => {
          if (replaying) buffered.push(event);
          else send(event);
        });
        const heartbeat = setInterval(() => raw.write(': keep-alive\n\n'), HEARTBEAT_MS);
        heartbeat.unref();
        raw.once('close', () => {
          clearInterval(heartbeat);
          unsubscribe();
        });

        if (resumeFrom !== undefined) {
          for (const event of await events.since(resumeFrom, RESUME_LIMIT)) send(event);
          replaying = false;
          for (const event of buffered.splice(0)) send(event);
        }
        return reply;
      },
    }),
  ];
}
