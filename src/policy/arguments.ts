/**
 * Tool arguments validated against the pinned inputSchema before anything is
 * sent upstream. Each schema is compiled once per pin (the pin hash names an
 * exact definition); schemas too large or deep were quarantined before they
 * could get here, and one that fails to compile is refused, never trusted.
 * Nothing a schema says can hold the event loop: patterns run on RE2 (linear
 * time) and `uniqueItems` on a set (see schema-safety.ts); a `$ref` loop that
 * consumes nothing is refused, never run. Whatever still throws while checking
 * (a stack overflow on deeply nested arguments) is a typed refusal, logged once
 * per schema: an agent never gets a bare internal error, and nothing is sent.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { GatehouseError } from '../errors.js';
import type { Logger } from '../logging.js';
import {
  itemsAreUnique,
  linearRegExp,
  refLoop,
  unsafePatterns,
  VALIDATION_BUDGET,
  ValidationBudgetExceeded,
  withValidationBudget,
} from './schema-safety.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const MAX_COMPILED = 5000;

export class ArgumentValidator {
  private readonly ajv: Ajv;
  private readonly compiled = new Map<string, ValidateFunction | Error>();
  /** Pin keys whose validation threw and was logged: an agent repeating the call does not flood the log. */
  private readonly logged = new Set<string>();
  private readonly log: Pick<Logger, 'warn'>;

  /** `log`: where a validation that threw is reported (default: a process warning). */
  constructor(options: { log?: Pick<Logger, 'warn'> } = {}) {
    this.log = options.log ?? {
      warn: (details: object, message?: string) => process.emitWarning(`${message} ${JSON.stringify(details)}`),
    };
    // strict: false — upstream schemas use keywords Ajv does not know (and that is not our error).
    this.ajv = addFormats(
      new Ajv({
        strict: false,
        allErrors: true,
        validateSchema: false,
        allowUnionTypes: true,
        code: { regExp: linearRegExp },
      }),
    );
    this.ajv.removeKeyword('uniqueItems');
    this.ajv.addKeyword({
      keyword: 'uniqueItems',
      type: 'array',
      schemaType: 'boolean',
      error: { message: 'must NOT have duplicate items' },
      validate: (unique: boolean, data: unknown[]) => !unique || itemsAreUnique(data),
    });
  }

  /** Throws `tool.invalid_arguments` naming each failing path. */
  validate(pinKey: string, schema: unknown, args: Record<string, unknown>): void {
    const validate = this.compile(pinKey, schema);
    if (validate instanceof UnsafeSchema) {
      if (validate.loop) {
        throw new GatehouseError(
          'tool.unsafe_schema',
          'The tool’s input schema refers to itself without descending into the arguments (a $ref loop); validating would never end, so the call is refused.',
          { reason: 'unsafe_schema', loop: validate.loop.slice(0, 10) },
        );
      }
      throw new GatehouseError('tool.unsafe_schema', undefined, {
        reason: 'unsafe_schema',
        patterns: validate.patterns.slice(0, 5),
      });
    }
    if (validate instanceof Error) {
      throw new GatehouseError(
        'tool.invalid_arguments',
        'The tool’s input schema cannot be compiled; the call is refused.',
        {
          reason: 'schema_uncompilable',
        },
      );
    }
    let valid: boolean;
    try {
      valid = withValidationBudget(VALIDATION_BUDGET, () => validate(args) as boolean);
    } catch (error) {
      if (error instanceof ValidationBudgetExceeded) throw new GatehouseError('tool.arguments_too_complex');
      throw this.unchecked(pinKey, error);
    }
    if (!valid) {
      const issues = (validate.errors ?? []).slice(0, 20).map((e: ErrorObject) => ({
        path: e.instancePath || '/',
        message: e.message ?? 'invalid',
      }));
      throw new GatehouseError(
        'tool.invalid_arguments',
        `The arguments do not match the tool’s input schema: ${issues.map((i) => `${i.path} ${i.message}`).join('; ')}.`,
        { issues },
      );
    }
  }

  /**
   * A validation that threw (not over its budget): a stack overflow (RangeError: arguments nested deeper
   * than the compiled validator can recurse) is `tool.arguments_too_complex`; anything else means the
   * arguments could not be checked, `tool.invalid_arguments`. Either way the call is refused.
   */
  private unchecked(pinKey: string, error: unknown): GatehouseError {
    const tooDeep = error instanceof RangeError;
    if (!this.logged.has(pinKey)) {
      if (this.logged.size >= MAX_COMPILED) this.logged.clear();
      this.logged.add(pinKey);
      // The error only: the arguments may carry secrets.
      this.log.warn(
        { pinKey, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) },
        'Checking tool arguments against the pinned input schema threw; the call is refused.',
      );
    }
    return tooDeep
      ? new GatehouseError(
          'tool.arguments_too_complex',
          'The arguments are nested too deeply to check against the tool’s input schema; send flatter arguments.',
          { reason: 'too_deep' },
        )
      : new GatehouseError(
          'tool.invalid_arguments',
          'The arguments could not be checked against the tool’s input schema; the call is refused.',
          { reason: 'validation_failed' },
        );
  }

  private compile(pinKey: string, schema: unknown): ValidateFunction | Error {
    let compiled = this.compiled.get(pinKey);
    if (!compiled) {
      try {
        const unsafe = unsafePatterns(schema);
        if (unsafe.length > 0) throw new UnsafeSchema(unsafe);
        // Pins made before loops were refused at the handshake get here: never compiled, never run.
        const loop = refLoop(schema);
        if (loop) throw new UnsafeSchema([], loop);
        compiled = this.ajv.compile((schema ?? { type: 'object' }) as object);
      } catch (error) {
        compiled = error instanceof Error ? error : new Error(String(error));
      }
      if (this.compiled.size >= MAX_COMPILED) this.compiled.delete(this.compiled.keys().next().value as string);
      this.compiled.set(pinKey, compiled);
    }
    return compiled;
  }
}

/**
 * A schema never compiled: with a pattern RE2 cannot run (the native engine could backtrack for ever), or a
 * `$ref` loop that consumes nothing (`loop`: validating would recurse until the stack overflows).
 */
class UnsafeSchema extends Error {
  constructor(
    readonly patterns: string[],
    readonly loop?: string[],
  ) {
    super(loop ? 'The schema has a $ref loop that consumes nothing.' : 'The schema has patterns RE2 cannot run.');
  }
}
