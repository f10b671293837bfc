/**
 * The live event stream ends when its reader loses access: its token revoked, its session logged out, its
 * person demoted to member. Before, access was checked once when the stream opened, and the keep-alive held it
 * open for ever, feeding later events (who calls what, approvals, tokens) to a reader who may no longer see them.
 */
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sqliteTarget } from '../helpers/stores.js';

let gw: TestGateway;
let base: string;
beforeEach(async () => {
  gw = await startTestGateway(sqliteTarget);
  base = await gw.listen();
});
afterEach(async () => gw.close());

/** Opens the stream with these headers; `text()` is what arrived, `ended` settles when the gateway ends it. */
async function openStream(headers: Record<string, string>) {
  const request = http.get(`${base}/api/mcp/stream`, { headers });
  const response = await new Promise<http.IncomingMessage>((resolve) => request.once('response', resolve));
  expect(response.statusCode).toBe(200);
  const chunks: string[] = [];
  response.on('data', (chunk: Buffer) => chunks.push(chunk.toString()));
  const closed = new Promise<void>((resolve) => response.once('end', () => resolve()));
  // Bounded: a stream that stays open fails the test in 10 s instead of hanging it.
  const ended = Promise.race([
    closed,
    sleep(10_000).then(() => {
      throw new Error('the stream stayed open');
    }),
  ]);
  ended.catch(() => {});
  return { text: () => chunks.join(''), ended, close: () => request.destroy() };
}

const setting = (value: number) => gw.request('PATCH', '/api/settings', { body: { 'hub.rateLimit': value } });

it('ends when the token that opened it is revoked', async () => {
  const operator = (await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'ops' } })).json();
  const stream = await openStream({ authorization: `Bearer ${operator.token}` });
  await setting(101);
  await eventually(() => expect(stream.text()).toContain('event: settings.changed'));

  expect((await gw.request('DELETE', `/api/tokens/${operator.id}`)).statusCode).toBe(200);
  await setting(102);
  await stream.ended;
  expect(stream.text()).not.toContain('"value":102');
  expect(stream.text().match(/event: settings\.changed/g)).toHaveLength(1);
});

it('ends when the session logs out, and when its person is demoted to member', async () => {
  const bob = (await gw.request('POST', '/api/users', { body: { name: 'bob', role: 'operator' } })).json();
  const token = (
    await gw.request('POST', '/api/tokens', { body: { role: 'operator', name: 'b', userId: bob.id } })
  ).json().token;
  const signIn = async () => {
    const answer = await gw.request('POST', '/auth/session', { token: null, body: { token } });
    const cookies = ([] as string[]).concat(answer.headers['set-cookie'] as string | string[]);
    return { cookie: cookies.map((line) => line.split(';')[0]).join('; '), csrf: answer.json().csrf as string };
  };

  const first = await signIn();
  const loggedOut = await openStream({ cookie: first.cookie });
  const out = await gw.request('POST', '/auth/logout', {
    token: null,
    headers: { cookie: first.cookie, 'x-gatehouse-csrf': first.csrf },
  });
  expect(out.json()).toMatchObject({ signedOut: true });
  await setting(103);
  await loggedOut.ended;
  expect(loggedOut.text()).not.toContain('settings.changed');

  const second = await signIn();
  const demoted = await openStream({ cookie: second.cookie });
  expect((await gw.request('PATCH', `/api/users/${bob.id}`, { body: { role: 'member' } })).statusCode).toBe(200);
  await setting(104);
  await demoted.ended;
  expect(demoted.text()).not.toContain('settings.changed');
});
