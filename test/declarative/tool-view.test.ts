/** A config-file token's `toolView` (issue 22): created, changed, and refused on a role that carries none. */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { describeEachStore } from '../helpers/stores.js';
import { apply, parse, sha256 } from './helpers.js';

const AGENT_TOKEN = 'gh_declarative-search-token-0123456789abcdef';

describeEachStore('declarative config: tool views', (target) => {
  let gw: TestGateway;
  beforeEach(async () => {
    gw = await startTestGateway(target);
  });
  afterEach(async () => {
    await gw.close();
  });

  const agent = (toolView?: string) => ({
    tokens: [{ name: 'big', role: 'agent', hash: sha256(AGENT_TOKEN), ...(toolView ? { toolView } : {}) }],
  });
  const stored = async () =>
    ((await gw.request('GET', '/api/tokens')).json().tokens as Array<{ name: string; toolView: string | null }>).find(
      (t) => t.name === 'big',
    );

  it('sets and changes an agent token’s tool view, leaving it alone when the file names none', async () => {
    expect((await apply(gw, agent('search'))).tokens).toMatchObject({ created: ['big'] });
    expect(await stored()).toMatchObject({ toolView: 'search' });
    expect((await apply(gw, agent('search'))).tokens).toMatchObject({ unchanged: ['big'] });
    expect((await apply(gw, agent('toolset:finance'))).tokens).toMatchObject({ updated: ['big'] });
    expect(await stored()).toMatchObject({ toolView: 'toolset:finance' });
    expect((await apply(gw, agent())).tokens).toMatchObject({ unchanged: ['big'] });
  });

  it('refuses a tool view that is not one, or on a token that is not an agent’s', () => {
    expect(() => parse(agent('everything'))).toThrow(/toolView/);
    expect(() =>
      parse({ tokens: [{ name: 'op', role: 'operator', hash: sha256(AGENT_TOKEN), toolView: 'search' }] }),
    ).toThrow(/only agent tokens carry toolView/);
  });
});
