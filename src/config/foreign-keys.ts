/**
 * Keys other MCP clients put in a server entry, met when one is pasted into hub.config.json
 * (which also takes `mcpServers`): "unknown key" alone leaves the user guessing, so the error
 * says what the hub has instead.
 */
const SERVER_KEY_HINTS: Readonly<Record<string, string>> = {
  timeout: "Cline's and Roo Code's timeout is in seconds; here it is timeoutMs, in milliseconds",
  alwaysAllow: "Roo Code's tools to run without asking: the hub asks before no call unless policy.confirm names it; remove it",
  disabledTools: 'tools.deny hides tools (globs on the server\'s tool names)',
  transportType: 'type says the transport ("stdio" or "http")',
  serverUrl: 'url is the address of an HTTP server',
  envFile: 'the hub reads no env file: set env, where "${env:NAME}" takes a variable of the hub\'s environment',
};

/**
 * Keys met in a tool's own settings (`servers.<id>.tools.<name>`, which hold `annotations`
 * alone): settings the hub has elsewhere, hub-wide.
 */
const TOOL_KEY_HINTS: Readonly<Record<string, string>> = {
  confirm: 'policy.confirm names the tools whose calls the user confirms (globs of hub tool names, such as "gh__delete_*")',
};

/** Keys of a client's whole file, pasted with its servers (VS Code's `.vscode/mcp.json` has `inputs`). */
const TOP_KEY_HINTS: Readonly<Record<string, string>> = {
  inputs: 'VS Code\'s prompts for values: the hub prompts for none; set an environment variable and write "${env:NAME}" where the file says "${input:ID}", and remove inputs',
};

/**
 * A client's key that is another name for one the hub requires (Windsurf's `serverUrl`): the
 * entry lacks nothing but that name, so its shape's "must have exactly one of …" is the same
 * mistake again.
 */
export const FOREIGN_KEY_FOR: Readonly<Record<string, string>> = { serverUrl: 'url' };

/** What to say of unknown key `key` in an object whose known keys are `known` (a server entry has `command` and `timeoutMs`). */
export function foreignKeyHint(key: string, known: readonly string[]): string | undefined {
  if (known.length === 1 && known[0] === 'annotations') return Object.hasOwn(TOOL_KEY_HINTS, key) ? TOOL_KEY_HINTS[key] : undefined;
  if (known.includes('servers') && known.includes('mcpServers')) return Object.hasOwn(TOP_KEY_HINTS, key) ? TOP_KEY_HINTS[key] : undefined;
  if (!known.includes('command') || !known.includes('timeoutMs')) return undefined;
  return Object.hasOwn(SERVER_KEY_HINTS, key) ? SERVER_KEY_HINTS[key] : undefined;
}
