import { describe, expect, it } from 'vitest';
import { boundCallResult, boundStrings, boundTool, DEFAULT_BOUNDS } from '../../src/upstream/index.js';

const text = (t: string) => ({ type: 'text', text: t });
const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

describe('boundCallResult', () => {
  it('passes a small result through unchanged and without `truncated`', () => {
    const input = { content: [text('hi')], structuredContent: { a: 1 }, _meta: { k: 'v' } };
    const out = boundCallResult(input);
    expect(out).toEqual({ isError: false, content: [text('hi')], structuredContent: { a: 1 }, _meta: { k: 'v' } });
    expect(out).not.toHaveProperty('truncated');
    // Nothing changed, so nothing was copied.
    expect(out.content[0]).toBe(input.content[0]);
  });

  it('keeps isError and treats anything but `true` as false', () => {
    expect(boundCallResult({ content: [], isError: true }).isError).toBe(true);
    expect(boundCallResult({ content: [], isError: 'yes' }).isError).toBe(false);
    expect(boundCallResult({}).content).toEqual([]);
  });

  it('keeps at most 100 blocks', () => {
    const out = boundCallResult({ content: Array.from({ length: 250 }, (_, i) => text(`b${i}`)) });
    expect(out.content).toHaveLength(100);
    expect(out.content.at(-1)).toEqual(text('b99'));
    expect(out.truncated).toBe(true);
  });

  it('does not flag exactly 100 blocks', () => {
    const out = boundCallResult({ content: Array.from({ length: 100 }, (_, i) => text(`b${i}`)) });
    expect(out.content).toHaveLength(100);
    expect(out.truncated).toBeUndefined();
  });

  it('truncates a 10 MB string at 200k characters instead of failing', () => {
    const out = boundCallResult({ content: [text('x'.repeat(10 * 1024 * 1024))] });
    expect((out.content[0] as { text: string }).text).toHaveLength(200_000);
    expect(out.truncated).toBe(true);
  });

  it('truncates every string field, wherever it is', () => {
    const long = 'y'.repeat(300_000);
    const out = boundCallResult({
      content: [
        { type: 'image', data: long, mimeType: 'image/png' },
        { type: 'audio', data: long, mimeType: 'audio/wav' },
        { type: 'resource', resource: { uri: 'file:///a', text: long } },
        { type: 'resource', resource: { uri: 'file:///b', blob: long } },
        { type: 'text', text: 'ok', _meta: { note: long } },
      ],
      structuredContent: { deep: { list: [long, { again: long }] } },
      _meta: { trace: long },
    });
    const strings: string[] = [];
    JSON.stringify(out, (_, v) => {
      if (typeof v === 'string') strings.push(v);
      return v;
    });
    expect(Math.max(...strings.map((s) => s.length))).toBe(200_000);
    expect(strings.filter((s) => s.length === 200_000)).toHaveLength(8);
    expect(out.truncated).toBe(true);
  });

  it('never cuts a surrogate pair in half', () => {
    const emoji = '😀'; // two UTF-16 code units
    const out = boundCallResult({ content: [text(`${'a'.repeat(199_999)}${emoji}tail`)] }).content[0] as {
      text: string;
    };
    expect(out.text).toHaveLength(199_999);
    expect(out.text.endsWith('a')).toBe(true);
  });

  it('meets the 5 MB ceiling by dropping trailing blocks', () => {
    // 40 blocks of 150k characters: 6 MB of text, every string under the per-string limit.
    const blocks = Array.from({ length: 40 }, (_, i) => text(String(i % 10).repeat(150_000)));
    const out = boundCallResult({ content: blocks });
    expect(jsonBytes(out)).toBeLessThanOrEqual(DEFAULT_BOUNDS.maxSerializedBytes);
    expect(out.content.length).toBeLessThan(40);
    expect(out.content.length).toBeGreaterThan(30);
    // The leading blocks are the ones kept, in order.
    expect(out.content.map((b) => (b as { text: string }).text[0])).toEqual(
      Array.from({ length: out.content.length }, (_, i) => String(i % 10)),
    );
    expect(out.truncated).toBe(true);
  });

  it('keeps as many blocks as fit, measuring exactly', () => {
    const block = text('z'.repeat(1_000));
    const one = jsonBytes(block);
    const limit = jsonBytes({ isError: false, content: [block, block, block], truncated: true });
    const out = boundCallResult({ content: [block, block, block, block] }, { maxSerializedBytes: limit });
    expect(out.content).toHaveLength(3);
    expect(jsonBytes(out)).toBeLessThanOrEqual(limit);
    const tighter = boundCallResult({ content: [block, block, block, block] }, { maxSerializedBytes: limit - 1 });
    expect(tighter.content).toHaveLength(2);
    expect(one).toBeGreaterThan(1_000);
    // A whole result fits when it fits with room for the mark, as it would be counted when cut.
    const whole = boundCallResult({ content: [block, block, block] }, { maxSerializedBytes: limit });
    expect(whole.content).toHaveLength(3);
    expect(whole.truncated).toBeUndefined();
    const over = boundCallResult({ content: [block, block, block] }, { maxSerializedBytes: limit - 1 });
    expect(over).toMatchObject({ truncated: true, content: [block, block] });
  });

  it('drops structuredContent, then _meta, when blocks alone cannot meet the ceiling', () => {
    const big = Array.from({ length: 30 }, () => 's'.repeat(190_000));
    const out = boundCallResult({ content: [text('a')], structuredContent: { big }, _meta: { small: 'm' } });
    expect(out.structuredContent).toBeUndefined();
    expect(out._meta).toEqual({ small: 'm' });
    expect(jsonBytes(out)).toBeLessThanOrEqual(DEFAULT_BOUNDS.maxSerializedBytes);
    expect(out.truncated).toBe(true);

    const both = boundCallResult({ content: [], structuredContent: { big }, _meta: { big } });
    expect(both.structuredContent).toBeUndefined();
    expect(both._meta).toBeUndefined();
    expect(jsonBytes(both)).toBeLessThanOrEqual(DEFAULT_BOUNDS.maxSerializedBytes);
  });

  it('cuts nesting deeper than maxDepth instead of recursing without end', () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 10_000; i++) deep = [deep];
    const out = boundCallResult({ content: [text('a')], structuredContent: deep });
    expect(out.truncated).toBe(true);
    expect(() => JSON.stringify(out)).not.toThrow();
    expect(JSON.stringify(out)).not.toContain('bottom');
  });

  it('keeps a `__proto__` key as data without touching prototypes', () => {
    const parsed = JSON.parse(
      `{"content":[{"type":"text","text":"t","__proto__":{"polluted":"${'p'.repeat(200_001)}"}}]}`,
    );
    const out = boundCallResult(parsed);
    const block = out.content[0] as Record<string, unknown>;
    expect(Object.hasOwn(block, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(block)).toBe(Object.prototype);
  });

  it('ignores a _meta that is not an object', () => {
    expect(boundCallResult({ content: [], _meta: 'nope' })).not.toHaveProperty('_meta');
  });
});

describe('boundTool', () => {
  it('returns the known fields as given and drops the rest', () => {
    const tool = {
      name: 'search',
      title: 'Search',
      description: 'Finds things',
      inputSchema: { type: 'object' as const, properties: { q: { type: 'string' } } },
      outputSchema: { type: 'object' as const },
      annotations: { readOnlyHint: true },
      _meta: { owner: 'x' },
      extra: 'dropped',
    };
    const { tool: out, truncated } = boundTool(tool);
    const { extra: _, ...expected } = tool;
    expect(out).toEqual(expected);
    expect(truncated).toBe(false);
  });

  it('bounds strings inside a tool, schemas included', () => {
    const long = 'd'.repeat(250_000);
    const { tool, truncated } = boundTool({
      name: 't',
      description: long,
      inputSchema: { type: 'object', properties: { q: { type: 'string', description: long } } },
    });
    expect(tool.description).toHaveLength(200_000);
    const schema = tool.inputSchema as unknown as { properties: { q: { description: string } } };
    expect(schema.properties.q.description).toHaveLength(200_000);
    expect(truncated).toBe(true);
  });
});

describe('boundStrings', () => {
  it('honours custom limits', () => {
    expect(boundStrings({ a: 'abcdef' }, { maxStringChars: 3 })).toEqual({ value: { a: 'abc' }, truncated: true });
    expect(boundStrings([1, true, null], { maxStringChars: 3 })).toEqual({ value: [1, true, null], truncated: false });
  });
});
