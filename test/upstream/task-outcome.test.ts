/**
 * An upstream's answer as a task (the Tasks extension): accepted only on a call that declared the extension,
 * and only in the shape SEP-2663 gives it; anything else is the upstream's protocol error, never passed on.
 */
import { SdkErrorCode } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { findGatehouseError } from '../../src/errors.js';
import { outcomeOf } from '../../src/upstream/direct-result.js';

const NOW = '2026-12-02T07:00:00.000Z';
const task = (fields: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: 1,
  result: {
    resultType: 'task',
    taskId: 'task-1',
    status: 'working',
    createdAt: NOW,
    lastUpdatedAt: NOW,
    ttlMs: 60_000,
    pollIntervalMs: 500,
    _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'up', version: '1' } },
    ...fields,
  },
});

describe('an upstream task on a direct call', () => {
  it('is the task, reduced to its own fields, when the call declared the extension', () => {
    expect(outcomeOf(task(), 'modern', true)).toEqual({
      task: {
        taskId: 'task-1',
        status: 'working',
        createdAt: NOW,
        lastUpdatedAt: NOW,
        ttlMs: 60_000,
        pollIntervalMs: 500,
      },
    });
    expect(outcomeOf(task({ ttlMs: null, statusMessage: 'x'.repeat(100_000) }), 'modern', true)).toMatchObject({
      task: { ttlMs: null, statusMessage: expect.stringMatching(/^x+/) },
    });
    const bounded = outcomeOf(task({ statusMessage: 'x'.repeat(100_000) }), 'modern', true) as {
      task: { statusMessage: string };
    };
    expect(bounded.task.statusMessage.length).toBe(1024);
  });

  it('is refused as the SDK client refuses it when the call declared nothing', () => {
    expect(() => outcomeOf(task(), 'modern')).toThrow(
      expect.objectContaining({ code: SdkErrorCode.UnsupportedResultType }),
    );
  });

  it.each([
    ['an id with a space', { taskId: 'task 1' }],
    ['an empty id', { taskId: '' }],
    ['an id over 256 characters', { taskId: 't'.repeat(257) }],
    ['an unknown status', { status: 'sleeping' }],
    ['a fractional ttlMs', { ttlMs: 1.5 }],
    ['a createdAt that is not a time', { createdAt: 'yesterday' }],
  ])('with %s is the upstream’s protocol error', (_what, fields) => {
    let thrown: unknown;
    try {
      outcomeOf(task(fields), 'modern', true);
    } catch (error) {
      thrown = error;
    }
    expect(findGatehouseError(thrown)).toMatchObject({
      code: 'upstream_protocol_error',
      details: { reason: 'invalid_task' },
    });
  });
});
