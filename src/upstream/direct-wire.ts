/** What direct calls share about the wire: JSON-RPC message shapes, and headers in the SDK's order. */
import { ProtocolError } from '@modelcontextprotocol/client';
import type { Json } from '../wire.js';

export { isPlainObject, type Json } from '../wire.js';

/** A JSON-RPC request (not a response, not a notification), as the SDK's message schema admits one. */
export function isRequest(message: Json): boolean {
  const { id } = message;
  return (
    message.jsonrpc === '2.0' &&
    typeof message.method === 'string' &&
    (typeof id === 'string' || Number.isSafeInteger(id)) &&
    !('result' in message) &&
    !('error' in message)
  );
}

/** A JSON-RPC error as the SDK raises it. */
export function protocolError(error: Json): ProtocolError {
  const code = typeof error.code === 'number' ? error.code : -32603;
  const message = typeof error.message === 'string' ? error.message : 'Unknown error';
  return new ProtocolError(code, message, error.data);
}

/** Headers in the order the SDK transport sends them: a WHATWG `Headers` iterates by (lower-case) name. */
export function inSdkOrder(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).sort(([a], [b]) => (a < b ? -1 : 1)));
}
