import { redactLogText } from '../policy/secret-text.js';
import { clippedValue } from '../protocol/shown-value.js';
import { keyPath, type KeySegments } from './keypath.js';

export type Env = Record<string, string | undefined>;

export interface Interpolated {
  value: unknown;
  /** One message per missing variable, naming the key path. */
  problems: string[];
  /** Key paths whose value could not be completed (so schema errors there are noise). */
  failedPaths: Set<string>;
  /** Each value put in place of a reference (what the config took from the environment), and where. */
  values: { at: KeySegments; value: string }[];
}

/** How a reference to a variable the environment lacks ends its problem (UNSET_VARIABLE finds it). */
const UNSET = 'is not set';
/** A problem of a `${env:NAME}` whose variable is not set (from interpolateEnv). */
export const UNSET_VARIABLE = new RegExp(`: environment variable [A-Za-z_][A-Za-z0-9_]* ${UNSET}$`);

// `$${env:X}` is the escape for a literal `${env:X}`; `${env:X}` reads the variable.
const REFERENCE = /\$?\$\{env:([^}]*)\}/g;
const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
// A reference opened and never closed (not escaped): a typo whose text would go out as it is.
const UNCLOSED = /(?<!\$)\$\{env:[^}]*$/;

/** How much of a reference's name that is no variable name a problem quotes (a typo is shorter). */
const MAX_BAD_NAME = 32;

/**
 * The text of a `${env:…}` that names no variable, as a problem quotes it: it may be no
 * reference at all but a literal credential that holds "${env:" (a password with symbols in
 * it), and the problem goes to stderr, a log line and `config validate`'s output. Redacted as a
 * log line is, then cut (a credential of no known shape keeps MAX_BAD_NAME characters at most).
 */
function shownBadName(name: string): string {
  return clippedValue(redactLogText(name), MAX_BAD_NAME);
}

/**
 * Replaces `${env:NAME}` in every string value of a JSON document (keys are left alone).
 * Returns a new tree; the input is not modified. Messages name the variable, never its value.
 */
export function interpolateEnv(doc: unknown, env: Env): Interpolated {
  const problems: string[] = [];
  const failedPaths = new Set<string>();
  const values: Interpolated['values'] = [];

  const visitString = (s: string, at: KeySegments): string => {
    if (!s.includes('${')) return s;
    let failed = false;
    const out = s.replace(REFERENCE, (match: string, name: string) => {
      if (match.startsWith('$$')) return match.slice(1);
      const path = keyPath(at);
      if (!VAR_NAME.test(name)) {
        problems.push(`${path}: "\${env:${shownBadName(name)}}" is not a valid environment variable reference`);
        failed = true;
        return match;
      }
      // Its own variables only: `${env:toString}` or `${env:constructor}` read through the object were
      // Object's functions, and their source text went into the config as the value.
      const v = Object.hasOwn(env, name) ? env[name] : undefined;
      if (v === undefined) {
        problems.push(`${path}: environment variable ${name} ${UNSET}`);
        failed = true;
        return match;
      }
      values.push({ at, value: v });
      return v;
    });
    // Of the text as written, the closed references taken out (a value put in may hold anything).
    if (UNCLOSED.test(s.replace(REFERENCE, ''))) {
      problems.push(`${keyPath(at)}: a "\${env:" reference has no closing "}"`);
      failed = true;
    }
    if (failed) failedPaths.add(keyPath(at));
    return out;
  };

  const visit = (node: unknown, at: (string | number)[]): unknown => {
    if (typeof node === 'string') return visitString(node, at);
    if (Array.isArray(node)) return node.map((v, i) => visit(v, [...at, i]));
    if (node !== null && typeof node === 'object') {
      // fromEntries defines own properties, so a "__proto__" key stays a plain key.
      return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, visit(v, [...at, k])]));
    }
    return node;
  };

  return { value: visit(doc, []), problems, failedPaths, values };
}
