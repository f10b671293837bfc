/** Which requests take the dispatcher's lean path, and that their headers arrive whole whatever shape they had. */
import { Headers as UndiciHeaders } from 'undici';
import { describe, expect, it } from 'vitest';
import { leanRequest } from '../../src/egress/dispatch.js';

const url = new URL('http://upstream.example/mcp?x=1');

describe('leanRequest', () => {
  it('keeps every header, whatever shape the caller gave them in', () => {
    const shapes: RequestInit['headers'][] = [
      { Authorization: 'Bearer t', 'Content-Type': 'application/json' },
      [
        ['Authorization', 'Bearer t'],
        ['Content-Type', 'application/json'],
      ],
      new Headers({ Authorization: 'Bearer t', 'Content-Type': 'application/json' }),
      new UndiciHeaders({ Authorization: 'Bearer t', 'Content-Type': 'application/json' }) as unknown as Headers,
    ];
    for (const headers of shapes) {
      const lean = leanRequest(url, { method: 'POST', body: '{}', headers });
      expect(lean?.options).toMatchObject({
        origin: 'http://upstream.example',
        path: '/mcp?x=1',
        method: 'POST',
        body: '{}',
        headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
      });
    }
  });

  it('leaves streams, credentials in the URL and unusual methods to fetch', () => {
    expect(leanRequest(url, { method: 'POST', body: new ReadableStream() })).toBeUndefined();
    expect(leanRequest(new URL('http://user:pw@upstream.example/mcp'), { method: 'GET' })).toBeUndefined();
    expect(leanRequest(url, { method: 'PATCH', body: '{}' })).toBeUndefined();
  });

  it('labels a string body without a content type the way fetch does', () => {
    expect(leanRequest(url, { method: 'POST', body: 'x' })?.options.headers).toEqual({
      'content-type': 'text/plain;charset=UTF-8',
    });
  });
});
