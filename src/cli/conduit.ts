import { createConduit } from '../conduit.js';
import type { Config } from '../config.js';
import { closeOnSignals } from './signals.js';

export async function runConduit(config: Config): Promise<void> {
  const { app } = await createConduit(config);
  await app.listen({ host: config.host, port: config.port });
  app.log.info(
    { host: config.host, port: config.port, gated: config.toolToken !== undefined },
    'gatehouse conduit listening',
  );
  closeOnSignals(app);
}
