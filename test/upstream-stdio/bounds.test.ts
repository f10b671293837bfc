/**
 * A misbehaving stdio server ends itself, never the gateway: a stdout line over the limit, a flood
 * of non-protocol lines, or an exit in the middle of a call each fail the call with a typed error
 * and leave a clear `lastError`, while this (the gateway's) process carries on.
 */
import type { Client } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { GatehouseError } from '../../src/errors.js';
import {
  connectStdio,
  processGroupAlive,
  type StdioChild,
  type StdioSpec,
  stdioError,
} from '../../src/upstream/stdio/index.js';
import { cleanUp, fixtureSpec, newMarker } from '../fixtures/stdio/index.js';

const markers: string[] = [];
const children: StdioChild[] = [];

async function connect(flags: string[] = [], extra: Partial<StdioSpec> = {}) {
  const m = newMarker();
  markers.push(m);
  const connection = await connectStdio(fixtureSpec(m, flags, extra), { timeoutMs: 20_000 });
  children.push(connection.child);
  return connection;
}

/** Calls a tool expecting a failure; returns the typed error as the hub would see it. */
async function failingCall(client: Client, child: StdioChild, name: string, args: Record<string, unknown>) {
  const error = await client.callTool({ name, arguments: args }, { timeout: 15_000 }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, 'the call should have failed').toBeDefined();
  return stdioError(error, child);
}

afterEach(async () => {
  // Whatever a test did, nothing it started may outlive it (and a failing test leaves nothing either).
  expect(await cleanUp(children, markers)).toEqual({});
});

describe('stdout bounds', () => {
  it('a stdout line over the limit ends the child with a clear lastError, not the gateway', async () => {
    const errors: Error[] = [];
    const { client, child } = await connect([], { maxLineBytes: 1024 * 1024 });
    client.onerror = (e) => errors.push(e);
    const error = await failingCall(client, child, 'flood', { mode: 'huge', bytes: 4 * 1024 * 1024 });
    expect(error).toBeInstanceOf(GatehouseError);
    expect(error.code).toBe('upstream_protocol_error');
    expect(error.details).toMatchObject({ reason: 'line_too_long' });

    const info = await child.exited;
    expect(info.reason).toBe('line_too_long');
    expect(info.lastError).toMatch(/stdout line longer than 1048576 bytes/);
    expect(child.lastError).toBe(info.lastError);
    expect(processGroupAlive(child.pgid)).toBe(false);
    // The protocol layer heard about it, typed.
    expect(errors.some((e) => e instanceof GatehouseError && e.details?.reason === 'line_too_long')).toBe(true);
    // This process is fine, and a fresh child serves again.
    const again = await connect();
    expect((await again.client.callTool({ name: 'echo', arguments: { text: 'still here' } })).content).toEqual([
      { type: 'text', text: 'still here' },
    ]);
  });

  it('a line just under the limit is not a problem', async () => {
    const { client, child } = await connect([], { maxLineBytes: 256 * 1024 });
    const result = await client.callTool({ name: 'echo', arguments: { text: 'z'.repeat(200 * 1024) } });
    expect((result.content as Array<{ text: string }>)[0]!.text.length).toBe(200 * 1024);
    expect(child.running).toBe(true);
  });

  it('more non-protocol lines than tolerated ends the child', async () => {
    const noise: string[] = [];
    const { client, child } = await connect([], { maxNoiseLines: 100, onNoiseLine: (l) => noise.push(l) });
    const error = await failingCall(client, child, 'flood', { mode: 'garbage', lines: 5000 });
    expect(error.code).toBe('upstream_protocol_error');
    expect(error.details).toMatchObject({ reason: 'noise_flood' });
    const info = await child.exited;
    expect(info.reason).toBe('noise_flood');
    expect(info.lastError).toMatch(/more than 100 stdout lines that are not JSON-RPC/);
    expect(noise.length).toBe(101);
    expect(noise[0]).toBe('this is not json-rpc');
  });

  it('JSON that is not JSON-RPC counts as noise and is reported as a protocol error', async () => {
    const errors: Error[] = [];
    const { client, child } = await connect([], { maxNoiseLines: 50 });
    client.onerror = (e) => errors.push(e);
    const error = await failingCall(client, child, 'flood', { mode: 'json', lines: 1000 });
    expect(error.details).toMatchObject({ reason: 'noise_flood' });
    const garbage = errors.filter((e) => e instanceof GatehouseError && e.details?.reason === 'invalid_message');
    // Reported, but not a thousand times.
    expect(garbage.length).toBeGreaterThan(0);
    expect(garbage.length).toBeLessThanOrEqual(10);
  });

  it('a few banner lines before the protocol are tolerated', async () => {
    const noise: string[] = [];
    const { client, child } = await connect(['--banner=5'], { onNoiseLine: (l) => noise.push(l) });
    expect((await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } })).structuredContent).toEqual({ sum: 2 });
    expect(noise).toEqual([0, 1, 2, 3, 4].map((i) => `fixture banner line ${i}`));
    expect(child.noiseLines).toBe(5);
    expect(child.running).toBe(true);
  });
});

describe('a child that closes its stdout but lives on', () => {
  it('is stopped: the call fails typed and lastError says why', async () => {
    const { client, child } = await connect();
    const error = await failingCall(client, child, 'close_stdout', {});
    expect(error.code).toBe('upstream_unreachable');
    const info = await child.exited;
    expect(info.reason).toBe('stdout_closed');
    expect(info.lastError).toMatch(/closed its stdout/);
    expect(processGroupAlive(child.pgid)).toBe(false);
  });
});

describe('a child that exits mid-call', () => {
  it('fails the call with a typed error naming the exit', async () => {
    const { client, child } = await connect();
    const started = Date.now();
    const error = await failingCall(client, child, 'crash', { code: 3 });
    // Promptly: the exit ends the call, not a timeout.
    expect(Date.now() - started).toBeLessThan(5000);
    expect(error).toBeInstanceOf(GatehouseError);
    expect(error.code).toBe('upstream_unreachable');
    expect(error.details).toMatchObject({ reason: 'child_exited', exitCode: 3 });
    const info = await child.exited;
    expect(info).toMatchObject({ reason: 'exited', code: 3, killed: false, survivors: 0 });
    expect(child.lastError).toMatch(/exited with code 3/);
    // The next call on the dead connection fails typed too, at once.
    const next = await failingCall(client, child, 'echo', { text: 'x' });
    expect(next.code).toBe('upstream_unreachable');
  });

  it('several calls in flight all fail typed', async () => {
    const { client, child } = await connect();
    const slow = [1, 2, 3].map((i) =>
      client.callTool({ name: 'slow', arguments: { ms: 30_000 + i } }).then(
        () => undefined,
        (e: unknown) => stdioError(e, child),
      ),
    );
    await new Promise((r) => setTimeout(r, 100));
    await failingCall(client, child, 'crash', { code: 1 });
    for (const error of await Promise.all(slow)) {
      expect(error?.code).toBe('upstream_unreachable');
      expect(error?.details).toMatchObject({ reason: 'child_exited' });
    }
  });

  it('a call after stop fails typed', async () => {
    const { client, child } = await connect();
    await child.stop(500);
    const error = await failingCall(client, child, 'echo', { text: 'x' });
    expect(error.code).toBe('upstream_unreachable');
    expect(error.details).toMatchObject({ reason: 'child_stopped' });
  });
});
