// Resolve hook: `fs` imported from @modelcontextprotocol/conformance resolves to fs-glob-shim.mjs (Node 20 only).
export async function resolve(specifier, context, next) {
  if (
    (specifier === 'fs' || specifier === 'node:fs') &&
    context.parentURL?.includes('/@modelcontextprotocol/conformance/')
  ) {
    return { url: new URL('./fs-glob-shim.mjs', import.meta.url).href, shortCircuit: true };
  }
  return next(specifier, context);
}
