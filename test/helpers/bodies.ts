/** Reading an MCP endpoint's HTTP answer in tests that send raw requests. */

/** The body as a client reads it: JSON, each SSE `data:` message, or (anything else) the text itself. */
export function parseBody(text: string, contentType: string): unknown {
  if (contentType.split(';')[0]?.trim() === 'text/event-stream') {
    return text
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => JSON.parse(line.slice(5)));
  }
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
