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

/** What to say of unknown key `key` in an object whose known keys are `known` (a server entry has `command` and `timeoutMs`). */
export function foreignKeyHint(key: string, known: readonly string[]): string | undefined {
  if (known.length === 1 && known[0] === 'annotations') return Object.hasOwn(TOOL_KEY_HINTS, key) ? TOOL_KEY_HINTS[key] : undefined;
  if (!known.includes('command') || !known.includes('timeoutMs')) return undefined;
  return Object.hasOwn(SERVER_KEY_HINTS, key) ? SERVER_KEY_HINTS[key] : undefined;
}
