/**
 * What approval and import cards show of a stdio server's env (`shownEnvValue`): a variable that decides what code
 * runs in clear, so the approver sees it, but never a credential — a credential-looking name of a code-loading
 * family is masked, and a URL's `user:password@` is masked while its host and path stay.
 */
import { describe, expect, it } from 'vitest';
import { loadsCode, maskUrlCredentials, shownEnvValue } from '../../src/upstream/stdio/env.js';

describe('env values on cards', () => {
  it('shows what loads code, never a credential-looking name', () => {
    for (const name of [
      'NODE_OPTIONS',
      'PATH',
      'LD_PRELOAD',
      'npm_config_registry',
      'NPM_CONFIG_REGISTRY',
      'YARN_NPM_REGISTRY_SERVER',
      'PIP_INDEX_URL',
      'UV_EXTRA_INDEX_URL',
      'GIT_SSH_COMMAND',
    ]) {
      expect(loadsCode(name), name).toBe(true);
    }
    for (const name of [
      'YARN_NPM_AUTH_TOKEN',
      'YARN_NPM_AUTH_IDENT',
      'NPM_CONFIG__AUTHTOKEN',
      'npm_config__auth',
      'NPM_CONFIG_TOKEN',
      'NPM_CONFIG__PASSWORD',
      'NPM_CONFIG_USERNAME',
      'NPM_CONFIG_KEY',
      'UV_INDEX_CORP_PASSWORD',
      'UV_INDEX_CORP_USERNAME',
      'PIP_INDEX_SECRET',
      'API_KEY',
    ]) {
      expect(loadsCode(name), name).toBe(false);
      expect(shownEnvValue(name, 'the-secret'), name).toBeUndefined();
    }
  });

  it("masks a URL's userinfo, keeping where the code comes from", () => {
    expect(shownEnvValue('PIP_INDEX_URL', 'https://__token__:pypi-secret@pypi.corp.example/simple/')).toBe(
      'https://[redacted]@pypi.corp.example/simple/',
    );
    // A list (pip's extra index URLs), a password holding an unencoded @, a UV `name=url` index.
    expect(
      shownEnvValue(
        'PIP_EXTRA_INDEX_URL',
        'https://u:p@ss@a.example/simple http://b.example/simple https://tok@c.example',
      ),
    ).toBe('https://[redacted]@a.example/simple http://b.example/simple https://[redacted]@c.example');
    expect(shownEnvValue('UV_INDEX', 'corp=https://user:uv-secret@uv.corp.example/simple')).toBe(
      'corp=https://[redacted]@uv.corp.example/simple',
    );
    expect(shownEnvValue('npm_config_registry', 'https://registry.example/npm/?x=a@b')).toBe(
      'https://registry.example/npm/?x=a@b',
    );
    expect(shownEnvValue('NODE_OPTIONS', '--import=data:text/javascript,process.exit(77)')).toBe(
      '--import=data:text/javascript,process.exit(77)',
    );
    expect(maskUrlCredentials('git+ssh://git:tok@host.example/x.git')).toBe('git+ssh://[redacted]@host.example/x.git');
    expect(shownEnvValue('PIP_INDEX_URL', { sealed: true })).toBeUndefined();
    expect(shownEnvValue('API_KEY', 'https://u:p@h.example')).toBeUndefined();
  });
});
