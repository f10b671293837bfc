/** `doctor`'s OIDC row: the provider's discovery document is reachable and its JWKS parses (through the egress guard). */
import type { Config } from '../config.js';
import { createEgressFromConfig } from '../egress/from-config.js';
import { isGatehouseError } from '../errors.js';
import { OidcClient } from '../identity/oidc.js';
import type { Check } from './doctor.js';

export async function oidcCheck(config: Config): Promise<Check | undefined> {
  if (!config.oidcIssuer) return undefined;
  if (!config.oidcClientId) {
    return {
      name: 'oidc issuer',
      status: 'fail',
      detail: `${config.oidcIssuer} is set but GATEHOUSE_OIDC_CLIENT_ID is not`,
      hint: 'Set the client id Gatehouse is registered with at the provider.',
    };
  }
  const guard = createEgressFromConfig(config, undefined, config.oidcPrivateNetwork ? 'private' : 'public');
  try {
    const client = new OidcClient(
      { issuer: config.oidcIssuer, clientId: config.oidcClientId, roleMap: {}, groupsClaim: config.oidcGroupsClaim },
      guard.fetch,
    );
    await client.discover();
    const { count } = await client.keySet(true);
    return {
      name: 'oidc issuer',
      status: 'ok',
      detail: `${config.oidcIssuer}: discovery read, JWKS parsed (${count} key${count === 1 ? '' : 's'})`,
    };
  } catch (error) {
    return {
      name: 'oidc issuer',
      status: 'fail',
      detail: `${config.oidcIssuer}: ${isGatehouseError(error) ? error.message : String(error)}`,
      hint: 'Check GATEHOUSE_OIDC_ISSUER (and GATEHOUSE_OIDC_PRIVATE_NETWORK for a provider inside the network).',
    };
  } finally {
    await guard.close();
  }
}
