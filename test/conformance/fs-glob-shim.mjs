// Node 20 has no fs.globSync, which the conformance package imports by name (it only uses it to read result
// folders in `tier-check`). This module stands in for `fs` inside that package: all of node:fs, plus a
// globSync that handles the one shape it asks for (`**/<file name>` under a cwd).
import fs from 'node:fs';
import path from 'node:path';

export * from 'node:fs';
export default fs;

export const globSync =
  fs.globSync ??
  ((pattern, options = {}) => {
    const match = /^\*\*\/([^*?/[\]{}]+)$/.exec(pattern);
    if (!match) throw new Error(`fs-glob-shim: unsupported pattern ${pattern}`);
    const cwd = options.cwd ?? process.cwd();
    return fs
      .readdirSync(cwd, { recursive: true })
      .map(String)
      .filter((file) => path.basename(file) === match[1]);
  });
