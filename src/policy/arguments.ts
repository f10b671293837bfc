/**
 * Tool arguments validated against the pinned inputSchema before anything is
 * sent upstream. Each schema is compiled once per pin (the pin hash names an
 * exact definition); schemas too large or deep were quarantined before they
 * could get here, and one that fails to compile is refused, never trusted.
 * Nothing a schema says can hold the event loop: patterns run on RE2 (linear
 * time) and `uniqueItems` on a set (see schema-safety.ts).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { GatehouseError } from '../errors.js';
import {
  itemsAreUnique,
  linearRegExp,
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

  constructor() {
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
      if (!(error instanceof ValidationBudgetExceeded)) throw error;
      throw new GatehouseError('tool.arguments_too_complex');
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

  private compile(pinKey: string, schema: unknown): ValidateFunction | Error {
    let compiled = this.compiled.get(pinKey);
    if (!compiled) {
      const unsafe = unsafePatterns(schema);
      try {
        if (unsafe.length > 0) throw new UnsafeSchema(unsafe);
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

/** A schema with a pattern RE2 cannot run: never compiled (the native engine could backtrack for ever). */
class UnsafeSchema extends Error {
  constructor(readonly patterns: string[]) {
    super('The schema has patterns RE2 cannot run.');
  }
}
