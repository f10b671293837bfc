import { describe, expect, it } from 'vitest';
import { loadConfig, parseByteSize } from '../../src/config.js';
import { GatehouseError } from '../../src/errors.js';

function configError(env: Record<string, string>, flags: Record<string, unknown> = {}): GatehouseError {
  try {
    loadConfig({ env, flags });
  } catch (error) {
    expect(error).toBeInstanceOf(GatehouseError);
    return error as GatehouseError;
  }
  throw new Error('expected loadConfig to fail');
}

describe('config', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({ env: {} });
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      toolToken: undefined,
      listTimeoutMs: 25_000,
      callTimeoutMs: 55_000,
      allowPrivateNetworks: false,
      allowHttp: false,
      maxBodySize: 2 * 1024 * 1024,
      maxResponseSize: 16 * 1024 * 1024,
      sessionMode: 'pooled',
      nodeEnv: 'development',
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("reads hadrontool-mcp's variable names as aliases", () => {
    const config = loadConfig({
      env: {
        PORT: '9090',
        HOST: '0.0.0.0',
        MCP_TOOL_TOKEN: 'a-token-of-sufficient-length',
        MCP_LIST_TIMEOUT_MS: '1000',
        MCP_CALL_TIMEOUT_MS: '2000',
        MCP_ALLOW_PRIVATE_NETWORKS: 'true',
        MAX_BODY_SIZE: '512kb',
      },
    });
    expect(config).toMatchObject({
      port: 9090,
      host: '0.0.0.0',
      toolToken: 'a-token-of-sufficient-length',
      listTimeoutMs: 1000,
      callTimeoutMs: 2000,
      allowPrivateNetworks: true,
      maxBodySize: 512 * 1024,
    });
  });

  it('lets the GATEHOUSE_ name win over the alias, and a flag over both', () => {
    expect(loadConfig({ env: { PORT: '1', GATEHOUSE_PORT: '2' } }).port).toBe(2);
    expect(loadConfig({ env: { PORT: '1', GATEHOUSE_PORT: '2' }, flags: { port: '3' } }).port).toBe(3);
  });

  it('names every bad value at once', () => {
    const error = configError({ GATEHOUSE_PORT: 'eighty', MCP_ALLOW_HTTP: 'maybe', MAX_BODY_SIZE: 'big' });
    expect(error.message).toContain('GATEHOUSE_PORT');
    expect(error.message).toContain('MCP_ALLOW_HTTP');
    expect(error.message).toContain('MAX_BODY_SIZE');
  });

  it('refuses an unknown GATEHOUSE_ variable and names the right one', () => {
    expect(configError({ GATEHOUSE_PROT: '1' }).message).toContain('did you mean GATEHOUSE_PORT?');
    expect(configError({ GATEHOUSE_ALLOW_PRIVATE: 'true' }).message).toContain('GATEHOUSE_ALLOW_PRIVATE_NETWORKS');
  });

  it('accepts the test seam only under NODE_ENV=test', () => {
    expect(configError({ GATEHOUSE_TEST_PUBLIC_ADDRESSES: '127.0.0.2' }).message).toContain('NODE_ENV=test');
    const config = loadConfig({ env: { NODE_ENV: 'test', GATEHOUSE_TEST_PUBLIC_ADDRESSES: '127.0.0.2, 127.0.0.3' } });
    expect(config.testPublicAddresses).toEqual(['127.0.0.2', '127.0.0.3']);
  });

  it('parses byte sizes', () => {
    expect(parseByteSize('2mb')).toBe(2 * 1024 * 1024);
    expect(parseByteSize('1.5KB')).toBe(1536);
    expect(parseByteSize('100')).toBe(100);
    expect(parseByteSize('0')).toBeUndefined();
    expect(parseByteSize('-1mb')).toBeUndefined();
    expect(parseByteSize('2 parsecs')).toBeUndefined();
  });
});
