/**
 * The shape of `gatehouse.yaml`. Every section is optional, and a section the file leaves out is not managed.
 * A server entry is the REST install manifest with its id required, and a token entry the REST create body with
 * a hash or an env reference: the file and the API cannot disagree on what a server or a token is.
 */
import { z } from 'zod';
import { manifestSchema, serverOptionFields } from '../api/servers.js';
import { createBody } from '../api/tokens.js';
import { isGatehouseError } from '../errors.js';
import { assertToolPolicy } from '../policy/tool-policy.js';
import { serverIdSchema } from '../registry/ids.js';
import { envNameSchema } from '../registry/manifest.js';
import { isSettingName, SETTING_KEYS } from '../settings/keys.js';
import { toolsetNameSchema, toolsetToolsSchema } from '../toolsets/model.js';

/** A server entry: the install manifest, its id, and the options an install by manifest does not take. */
export const serverEntrySchema = manifestSchema
  .safeExtend({
    id: serverIdSchema,
    pathArgs: serverOptionFields.pathArgs.optional(),
    workspaceRoots: serverOptionFields.workspaceRoots.optional(),
    lazyStart: serverOptionFields.lazyStart.optional(),
    idleShutdownS: serverOptionFields.idleShutdownS.optional(),
  })
  .superRefine((server, ctx) => {
    if (!server.toolPolicy) return;
    try {
      assertToolPolicy(server.toolPolicy);
    } catch (error) {
      if (!isGatehouseError(error)) throw error;
      ctx.addIssue({ code: 'custom', path: ['toolPolicy'], message: error.message });
    }
  });

/** Each key checked against the settings catalogue, so an error names the key and the file line. */
const settingsSchema = z.record(z.string(), z.unknown()).superRefine((settings, ctx) => {
  for (const [key, value] of Object.entries(settings)) {
    if (!isSettingName(key)) {
      ctx.addIssue({
        code: 'custom',
        path: [key],
        message: `unknown setting; known: ${Object.keys(SETTING_KEYS).join(', ')}`,
      });
      continue;
    }
    const parsed = SETTING_KEYS[key].schema.safeParse(value);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        ctx.addIssue({ code: 'custom', path: [key, ...issue.path], message: issue.message });
      }
    }
  }
});

export const tokenEntrySchema = createBody
  .safeExtend({
    /** The token's SHA-256, as `gatehouse` stores it: the file never holds the token. */
    hash: z
      .string()
      .regex(/^sha256:[0-9a-fA-F]{64}$/, 'expected sha256:<64 hex digits>')
      .optional(),
    /** Or a variable holding the token, read at start; only its hash is stored. */
    env: envNameSchema.optional(),
  })
  .superRefine((token, ctx) => {
    if ((token.hash === undefined) === (token.env === undefined)) {
      ctx.addIssue({ code: 'custom', path: [], message: 'give exactly one of hash or env' });
    }
    if (token.groups && token.role !== 'agent') {
      ctx.addIssue({ code: 'custom', path: ['groups'], message: 'only agent tokens carry groups' });
    }
    if (token.toolView != null && token.role !== 'agent') {
      ctx.addIssue({ code: 'custom', path: ['toolView'], message: 'only agent tokens carry toolView' });
    }
  });

/** Ids and names identify entries across applies, so each may appear once. */
function unique<T>(items: readonly T[] | undefined, keyOf: (item: T) => string, section: string, field: string) {
  return (ctx: z.RefinementCtx) => {
    const seen = new Map<string, number>();
    items?.forEach((item, index) => {
      const key = keyOf(item);
      const first = seen.get(key);
      if (first === undefined) seen.set(key, index);
      else
        ctx.addIssue({ code: 'custom', path: [section, index, field], message: `duplicate of ${section}[${first}]` });
    });
  };
}

export const declarativeSchema = z
  .strictObject({
    servers: z.array(serverEntrySchema).max(1000).optional(),
    settings: settingsSchema.optional(),
    tokens: z.array(tokenEntrySchema).max(1000).optional(),
    /** Toolsets (issue 22): the REST create body. */
    toolsets: z
      .array(
        z.strictObject({
          name: toolsetNameSchema,
          description: z.string().max(2000).nullable().optional(),
          tools: toolsetToolsSchema,
        }),
      )
      .max(1000)
      .optional(),
  })
  .superRefine((file, ctx) => {
    unique(file.servers, (s) => s.id, 'servers', 'id')(ctx);
    unique(file.tokens, (t) => t.name, 'tokens', 'name')(ctx);
    unique(file.toolsets, (t) => t.name, 'toolsets', 'name')(ctx);
  });

export type DeclarativeFile = z.output<typeof declarativeSchema>;
export type ServerEntry = z.output<typeof serverEntrySchema>;
export type TokenEntry = z.output<typeof tokenEntrySchema>;
