/**
 * The bounds of pass-through answers (`boundResult`), list items (`boundItem`), what an upstream says of itself
 * (`boundDiscover`) and the page-by-page list drain (`drain`).
 */
import { describe, expect, it } from 'vitest';
import {
  boundDiscover,
  boundItem,
  boundResult,
  COMPLETION_RESULT,
  DEFAULT_BOUNDS,
  MAX_INSTRUCTIONS_CHARS,
  PROMPT_RESULT,
  RESOURCE_RESULT,
  TRUNCATED_META_KEY,
} from '../../src/upstream/bounds.js';
import { DRAIN_LIMITS, drain } from '../../src/upstream/drain.js';

type Json = Record<string, unknown>;
const MAX = DEFAULT_BOUNDS.maxStringChars;
const deep = (depth: number): Json => {
  let value: Json = { leaf: true };
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
};

describe('boundResult', () => {
  it('passes a small result through as it is, unmarked', () => {
    const read = { contents: [{ uri: 'file:///a', text: 'hello' }], _meta: { k: 'v' } };
    expect(boundResult(read, RESOURCE_RESULT)).toEqual(read);
  });

  it('cuts strings and nesting as a tool result, and says so in _meta', () => {
    const prompt = {
      description: 'd'.repeat(MAX + 5),
      messages: [{ role: 'user', content: { type: 'text', text: 't'.repeat(MAX + 5), _meta: deep(300_000) } }],
      _meta: { keep: 1 },
    };
    const bounded = boundResult(prompt, PROMPT_RESULT) as Json & typeof prompt;
    expect(bounded.description).toHaveLength(MAX);
    expect(bounded.messages[0]!.content.text).toHaveLength(MAX);
    expect(() => JSON.stringify(bounded)).not.toThrow();
    expect(bounded._meta).toEqual({ keep: 1, [TRUNCATED_META_KEY]: true });
  });

  it('keeps at most maxBlocks entries', () => {
    const prompt = {
      messages: Array.from({ length: 150 }, () => ({ role: 'user', content: { type: 'text', text: 'x' } })),
    };
    const bounded = boundResult(prompt, PROMPT_RESULT);
    expect(bounded.messages).toHaveLength(DEFAULT_BOUNDS.maxBlocks);
    expect((bounded as Json)._meta).toEqual({ [TRUNCATED_META_KEY]: true });
  });

  it('bounds completion values where they are nested, dropping trailing ones to meet the ceiling', () => {
    const result = { completion: { values: Array.from({ length: 40 }, () => 'c'.repeat(MAX + 1)), hasMore: true } };
    const bounded = boundResult(result, COMPLETION_RESULT) as Json & typeof result;
    const { values } = bounded.completion;
    expect(values.length).toBe(Math.floor(DEFAULT_BOUNDS.maxSerializedBytes / (MAX + 3)));
    for (const value of values) expect(value).toHaveLength(MAX);
    expect(bounded.completion.hasMore).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(bounded))).toBeLessThanOrEqual(DEFAULT_BOUNDS.maxSerializedBytes);
  });

  it("keeps a resource's text or blob whole below the ceiling", () => {
    const read = { contents: [{ uri: 'ui://app', mimeType: 'text/html', text: 'h'.repeat(1_000_000) }] };
    expect(boundResult(read, RESOURCE_RESULT)).toEqual(read);
  });

  it('drops trailing contents that do not fit, and refuses a first one that cannot', () => {
    const big = 'b'.repeat(3 * 1024 * 1024);
    const two = {
      contents: [
        { uri: 'file:///1', blob: big },
        { uri: 'file:///2', blob: big },
      ],
    };
    const bounded = boundResult(two, RESOURCE_RESULT) as Json & typeof two;
    expect(bounded.contents.map((c) => c.uri)).toEqual(['file:///1']);
    expect(bounded._meta).toEqual({ [TRUNCATED_META_KEY]: true });

    const huge = { contents: [{ uri: 'file:///h', text: 'y'.repeat(10 * 1024 * 1024) }] };
    expect(() => boundResult(huge, RESOURCE_RESULT)).toThrow(/larger than Gatehouse passes on/);
    const justOver = { contents: [{ uri: 'file:///h', text: 'y'.repeat(DEFAULT_BOUNDS.maxSerializedBytes - 10) }] };
    expect(() => boundResult(justOver, RESOURCE_RESULT)).toThrow(/larger than Gatehouse passes on/);
  });

  it('drops _meta before the first entry', () => {
    const meta = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, 'm'.repeat(MAX)]));
    const read = { contents: [{ uri: 'file:///1', text: 't'.repeat(2 * 1024 * 1024) }], _meta: meta };
    const bounded = boundResult(read, RESOURCE_RESULT) as Json & typeof read;
    expect(bounded.contents).toHaveLength(1);
    expect(bounded._meta).toEqual({ [TRUNCATED_META_KEY]: true });
  });
});

describe('boundItem and boundDiscover', () => {
  it('bounds a list item without dropping its fields', () => {
    const { item, truncated } = boundItem({ name: 'p', description: 'd'.repeat(MAX + 1), extra: 1, _meta: deep(500) });
    expect(truncated).toBe(true);
    expect(item.description).toHaveLength(MAX);
    expect(item.extra).toBe(1);
    expect(() => JSON.stringify(item)).not.toThrow();
  });

  it('cuts instructions to a few kB and the rest as anywhere else', () => {
    const discover = boundDiscover({
      serverInfo: { name: 'n'.repeat(MAX + 1), version: '1' },
      instructions: 'i'.repeat(100_000),
    });
    expect(discover.instructions).toHaveLength(MAX_INSTRUCTIONS_CHARS);
    expect(discover.serverInfo.name).toHaveLength(MAX);
    expect(boundDiscover(undefined)).toBeUndefined();
  });
});

describe('drain', () => {
  const pages = (count: number, perPage: number, item: (page: number, i: number) => unknown) => {
    let asked = 0;
    const page = async (cursor: string | undefined) => {
      asked += 1;
      const n = Number(cursor ?? 0);
      return {
        items: Array.from({ length: perPage }, (_, i) => item(n, i)),
        ...(n + 1 < count ? { nextCursor: String(n + 1) } : {}),
      };
    };
    return { page, asked: () => asked };
  };

  it('asks at most maxPages pages and keeps at most maxItems items', async () => {
    const few = pages(60, 5, (n, i) => ({ name: `${n}_${i}` }));
    expect(await drain(few.page)).toHaveLength(DRAIN_LIMITS.maxPages * 5);
    expect(few.asked()).toBe(DRAIN_LIMITS.maxPages);
    const many = pages(60, 30, (n, i) => ({ name: `${n}_${i}` }));
    expect(await drain(many.page)).toHaveLength(DRAIN_LIMITS.maxItems);
    expect(many.asked()).toBe(Math.ceil(DRAIN_LIMITS.maxItems / 30));
  });

  it('bounds each item and stops at the serialized ceiling', async () => {
    const big = pages(60, 1, (n) => ({ name: `p${n}`, description: 'd'.repeat(8 * 1024 * 1024) }));
    const items = await drain<Json>(big.page);
    for (const item of items) expect(item.description).toHaveLength(MAX);
    expect(Buffer.byteLength(JSON.stringify(items))).toBeLessThanOrEqual(DRAIN_LIMITS.maxSerializedBytes);
    expect(big.asked()).toBe(items.length + 1);
  });

  it('ends at a cursor seen before', async () => {
    let asked = 0;
    const items = await drain(async () => {
      asked += 1;
      return { items: [{ name: `r${asked}` }], nextCursor: 'same' };
    });
    expect(items).toHaveLength(2);
    expect(asked).toBe(2);
  });
});
