#!/usr/bin/env node
// A legacy-era (2025-11-25) MCP echo server on stdio, written raw (no SDK) so that the upstream
// is never what a benchmark measures. It validates nothing: initialize, ping, tools/list and
// tools/call are answered (with --prompts, prompts/list and prompts/get too), server/discover
// and every other method get -32601 (which is how the hub's era probe learns that it is
// legacy). All answers to one stdin chunk go out in one write.
//
//   node bench/echo-stdio.mjs [--tools N] [--name NAME] [--prompts]
//
// --tools N: expose N tools (echo, then t1..t{N-1}); every one of them echoes.
// --prompts: a prompt `echo` too (prompts/list, prompts/get), its message the text argument.

import { numberOption, option } from './lib/args.mjs';

const TOOL_COUNT = Math.max(1, numberOption('tools', 1));
const NAME = option('name', 'bench-echo-stdio');
const PROMPTS = process.argv.includes('--prompts');
const CAPABILITIES = PROMPTS ? { tools: { listChanged: true }, prompts: {} } : { tools: { listChanged: true } };
const PROMPTS_RESULT = JSON.stringify({ prompts: [{ name: 'echo', description: 'Echoes its text argument back.', arguments: [{ name: 'text' }] }] });
const LEGACY_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];

const tools = [];
for (let i = 0; i < TOOL_COUNT; i++) {
  tools.push({
    name: i === 0 ? 'echo' : `t${i}`,
    description: 'Echoes its text argument back.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
  });
}
// Pre-serialised once: a list answer is a string concatenation.
const TOOLS_RESULT = JSON.stringify({ tools });

function answer(id, resultJson) {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${resultJson}}`;
}

function handle(msg) {
  if (msg === null || typeof msg !== 'object' || msg.id === undefined || typeof msg.method !== 'string') return undefined;
  const id = msg.id;
  switch (msg.method) {
    case 'initialize': {
      const asked = msg.params?.protocolVersion;
      const protocolVersion = LEGACY_VERSIONS.includes(asked) ? asked : LEGACY_VERSIONS[0];
      return answer(id, JSON.stringify({ protocolVersion, capabilities: CAPABILITIES, serverInfo: { name: NAME, version: '1.0.0' } }));
    }
    case 'ping':
      return answer(id, '{}');
    case 'tools/list':
      return answer(id, TOOLS_RESULT);
    case 'tools/call': {
      const text = msg.params?.arguments?.text;
      return answer(id, JSON.stringify({ content: [{ type: 'text', text: typeof text === 'string' ? text : '' }] }));
    }
    case 'prompts/list':
      if (PROMPTS) return answer(id, PROMPTS_RESULT);
      break;
    case 'prompts/get':
      if (PROMPTS) {
        const text = msg.params?.arguments?.text;
        return answer(id, JSON.stringify({ messages: [{ role: 'user', content: { type: 'text', text: typeof text === 'string' ? text : '' } }] }));
      }
      break;
  }
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"error":{"code":-32601,"message":"Method not found"}}`;
}

let rest = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  const text = rest + chunk;
  const lines = text.split('\n');
  rest = lines.pop();
  let out = '';
  for (const line of lines) {
    if (line.length === 0) continue;
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      continue;
    }
    const a = handle(msg);
    if (a !== undefined) out += a + '\n';
  }
  if (out) process.stdout.write(out);
});
process.stdin.on('end', () => process.exit(0));
process.stdout.on('error', () => process.exit(0));
