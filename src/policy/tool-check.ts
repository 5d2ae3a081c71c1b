import { argsErrorResult, outputErrorResult } from './tool-errors.js';
import type { SchemaValidator } from './validate.js';

type Result = Record<string, unknown>;
type ToolItem = { inputSchema?: unknown; outputSchema?: unknown };

/**
 * The router's two validation steps, kept out of the router: arguments before a call is
 * forwarded (a refusal is an isError result, and the upstream is not called) and
 * structuredContent after it.
 */
export function argsRefusal(v: SchemaValidator | undefined, hubName: string, item: ToolItem, args: unknown): { result: Result; message: string } | undefined {
  if (!v) return undefined;
  const verdict = v.checkArgs(hubName, item, args);
  if (verdict.ok) return undefined;
  const result = argsErrorResult(hubName, verdict, item.outputSchema !== undefined);
  return { result, message: String((result.content as { text: string }[])[0].text) };
}

/**
 * The result, or an isError result in its place when structuredContent breaks the outputSchema.
 * `byPlugins`: the result is what afterCall hooks made of the upstream's (checked before them).
 */
export function checkedOutput(v: SchemaValidator | undefined, hubName: string, item: ToolItem, result: Result, byPlugins = false): Result {
  if (!v) return result;
  const verdict = v.checkOutput(hubName, item, result);
  return verdict.ok ? result : outputErrorResult(hubName, verdict, byPlugins);
}
