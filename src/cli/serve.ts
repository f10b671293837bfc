import type { Config } from '../config.js';
import type { DeclarativeConfig } from '../declarative/load.js';
import type { ApplyReport } from '../declarative/report.js';
import { GatehouseError } from '../errors.js';
import { createGateway, type Gateway } from '../gateway.js';
import { closeOnSignals } from './signals.js';

export interface ServeOptions {
  /** A gatehouse.yaml applied after the gateway is assembled, before it listens. */
  configFile?: string | undefined;
  /** Remove servers and config tokens the file omits. */
  prune?: boolean | undefined;
}

export async function runServe(config: Config, options: ServeOptions = {}): Promise<void> {
  if (options.prune && !options.configFile) throw new GatehouseError('validation_error', '--prune needs --config.');
  // Read and checked before anything opens: a bad file fails the start having changed nothing.
  // The declarative modules (and their YAML parser) are loaded only for a --config start.
  const declared = options.configFile
    ? await (await import('../declarative/load.js')).loadDeclarativeConfig(options.configFile, {
        env: process.env,
        secretEnvPrefix: config.secretEnvPrefix,
      })
    : undefined;
  const gateway = await createGateway(config);
  const { app } = gateway;
  if (declared) {
    await applyOrClose(gateway, declared, options.prune ?? false);
    // Declared stdio servers start like those found at boot (enabled, not lazyStart).
    await gateway.supervisor.startEnabled();
  }
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    // The token exists in the store from now on: shown even when this start fails, or it is lost for good.
    printBootstrapToken(gateway.bootstrapToken);
    await app.close().catch(() => {});
    throw listenError(error, config) ?? error;
  }
  printBootstrapToken(gateway.bootstrapToken);
  app.log.info(
    { host: config.host, port: config.port, store: gateway.store.kind, location: gateway.store.location },
    'gatehouse serve listening',
  );
  closeOnSignals(app, { drain: () => gateway.drain(), drainMs: config.drainS * 1000 });
}

/** Printed once, to the terminal only (never to the log stream): it is not stored anywhere in clear. */
function printBootstrapToken(token: string | undefined): void {
  if (!token) return;
  process.stderr.write(
    `\nGatehouse created its first admin token. It is shown only this once; keep it safe:\n\n  ${token}\n\n`,
  );
}

/** A port that cannot be bound is a usage error of one line, not a stack trace. */
function listenError(error: unknown, config: Config): GatehouseError | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const where = `${config.host}:${config.port}`;
  const fix = 'choose another with --port or GATEHOUSE_PORT';
  if (code === 'EADDRINUSE')
    return new GatehouseError('serve.port_in_use', `Port ${config.port} is already in use on ${config.host}; ${fix}.`);
  if (code === 'EACCES')
    return new GatehouseError('serve.port_in_use', `Not allowed to listen on ${where}; ${fix} (1024 or above).`);
  if (code === 'EADDRNOTAVAIL')
    return new GatehouseError(
      'serve.port_in_use',
      `${config.host} is not an address of this machine; choose another with --host or GATEHOUSE_HOST.`,
    );
  return undefined;
}

async function applyOrClose(gateway: Gateway, declared: DeclarativeConfig, prune: boolean): Promise<void> {
  const [{ applyDeclarativeConfig }, { isNoop }] = await Promise.all([
    import('../declarative/apply.js'),
    import('../declarative/report.js'),
  ]);
  let report: ApplyReport;
  try {
    report = await applyDeclarativeConfig(gateway, declared, { prune });
  } catch (error) {
    await gateway.app.close();
    throw error;
  }
  const log = gateway.app.log;
  for (const kind of Object.values(report))
    for (const warning of kind.warnings) log.warn({ config: declared.file }, warning);
  const summary = Object.fromEntries(
    Object.entries(report).map(([kind, r]) => [
      kind,
      { created: r.created, updated: r.updated, pruned: r.pruned, unchanged: r.unchanged.length },
    ]),
  );
  log.info({ config: declared.file, prune, changed: !isNoop(report), ...summary }, 'declarative config applied');
}
