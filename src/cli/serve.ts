import type { Config } from '../config.js';
import { createGateway } from '../gateway.js';
import { closeOnSignals } from './signals.js';

export async function runServe(config: Config): Promise<void> {
  const gateway = await createGateway(config);
  const { app } = gateway;
  await app.listen({ host: config.host, port: config.port });
  if (gateway.bootstrapToken) {
    // Printed once, to the terminal only (never to the log stream): it is not stored anywhere in clear.
    process.stderr.write(
      `\nGatehouse created its first admin token. It is shown only this once; keep it safe:\n\n  ${gateway.bootstrapToken}\n\n`,
    );
  }
  app.log.info(
    { host: config.host, port: config.port, store: gateway.store.kind, location: gateway.store.location },
    'gatehouse serve listening',
  );
  closeOnSignals(app);
}
