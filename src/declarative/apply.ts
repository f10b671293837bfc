/**
 * Applies a loaded `gatehouse.yaml` to a gateway: servers, settings, tokens and toolsets. Everything is planned
 * against the store before anything is written, and the plan checks every refusal the writes could meet (a
 * transport that would change, credentials in a URL, a stdio command the allowlist — as the file's own settings
 * leave it — does not hold, a token held by another record, revoked, or named twice in the file), so a bad file
 * fails the start with nothing written. Then only what differs is written, so applying the same file twice
 * writes nothing — no audit event, no policy version bump — the second time.
 *
 * Checking in the plan rather than one store transaction: the registry, the settings and the token store each
 * open their own transactions and publish stream events as they write, and a Kysely transaction cannot nest.
 * What the plan cannot see is another replica applying at the same moment; those races are handled per write.
 *
 * Nothing the file omits is removed unless `prune` is set, and then only within the sections the file has: a
 * file without `tokens:` never revokes a token. The bootstrap admin token is never touched.
 */
import { basename } from 'node:path';
import { GatehouseError, isGatehouseError } from '../errors.js';
import type { Gateway } from '../gateway.js';
import type { DeclarativeConfig } from './load.js';
import { type ApplyReport, configPrincipal, emptyKindReport } from './report.js';
import { applyServers, planServers } from './servers.js';
import { applySettings, planSettings } from './settings.js';
import { applyTokens, planTokens } from './tokens.js';
import { applyToolsets, planToolsets } from './toolsets.js';

export type DeclarativeTarget = Pick<
  Gateway,
  'registry' | 'settings' | 'tokens' | 'audit' | 'events' | 'approvals' | 'store'
>;

export interface ApplyOptions {
  /** Remove servers and config tokens the file's sections omit. */
  prune?: boolean;
}

export async function applyDeclarativeConfig(
  gateway: DeclarativeTarget,
  config: DeclarativeConfig,
  options: ApplyOptions = {},
): Promise<ApplyReport> {
  const prune = options.prune ?? false;
  const actor = configPrincipal(basename(config.file));
  const report: ApplyReport = { servers: emptyKindReport(), settings: emptyKindReport(), tokens: emptyKindReport() };
  if (config.toolsets) report.toolsets = emptyKindReport();
  report.servers.warnings.push(...config.warnings);
  try {
    // Settings first: the servers are checked against the allowlist the file's own settings leave.
    const settings = await planSettings(gateway, config.settings ?? {});
    const allowedCommands = settings.after['stdio.allowedCommands'];
    const servers = config.servers && (await planServers(gateway.registry, config.servers, { prune, allowedCommands }));
    const tokens = config.tokens && (await planTokens(gateway, config.tokens, { prune }));
    const toolsets = config.toolsets && (await planToolsets(gateway, config.toolsets, { prune }));
    await applySettings(gateway, settings, actor, report.settings);
    if (servers) await applyServers(gateway.registry, servers, actor, report.servers);
    if (tokens) await applyTokens(gateway, tokens, actor, report.tokens);
    // After servers: a toolset may name the servers this very file installs.
    if (toolsets && report.toolsets) await applyToolsets(gateway, toolsets, actor, report.toolsets);
  } catch (error) {
    // The message names the YAML path; this adds the file.
    if (!isGatehouseError(error)) throw error;
    throw new GatehouseError(error.code, `${config.file}: ${error.message}`, error.details, { cause: error });
  }
  return report;
}
