/** `gatehouse admin tools`: the admin surface's tool map and tiers, derived from the route table. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { createGateway } from '../gateway.js';
import { createLogger } from '../logging.js';

export function addAdminCommands(program: Command): void {
  const admin = program.command('admin').description('The admin surface (/mcp/admin).');
  admin
    .command('tools')
    .description('Print every admin tool (name → route, tier, scope) and every excluded route with its reason.')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      // The route table is the same for every gateway: assemble one on a scratch store and read it.
      const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-admin-tools-'));
      try {
        const config = loadConfig({ env: { GATEHOUSE_DATA_DIR: dataDir, GATEHOUSE_LOG_LEVEL: 'silent' } });
        const gateway = await createGateway(config, { logger: createLogger(config) });
        const catalog = gateway.admin.catalog();
        await gateway.app.close();
        if (flags.json) {
          const tools = [...catalog.tools.values()].map((t) => ({
            name: t.name,
            route: catalog.aliases[t.name],
            tier: t.tier,
            scope: t.scope,
          }));
          process.stdout.write(
            `${JSON.stringify({ tools, tiers: catalog.tiers, excluded: catalog.excluded }, null, 2)}\n`,
          );
          return;
        }
        for (const tool of [...catalog.tools.values()].sort((a, b) => a.name.localeCompare(b.name))) {
          process.stdout.write(
            `${tool.name.padEnd(28)} ${tool.tier.padEnd(16)} ${tool.scope.padEnd(10)} ${catalog.aliases[tool.name]}\n`,
          );
        }
        process.stdout.write('\nexcluded:\n');
        for (const entry of catalog.excluded) process.stdout.write(`  ${entry.route.padEnd(40)} ${entry.reason}\n`);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
}
