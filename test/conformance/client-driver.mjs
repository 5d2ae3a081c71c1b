#!/usr/bin/env node
// The conformance suite's CLIENT scenarios, with the hub as the client under test.
//
//   conformance client --command "node test/conformance/client-driver.mjs" --scenario NAME
//
// The suite starts a mock MCP server and runs this command with the mock's URL as the last
// argument (the scenario name in MCP_CONFORMANCE_SCENARIO, its protocol version in
// MCP_CONFORMANCE_PROTOCOL_VERSION, extra inputs in MCP_CONFORMANCE_CONTEXT). The driver starts
// the built hub (`switchyard start` on a free loopback port) with that URL as its only upstream,
// unprefixed, waits until the hub reports it ready (/healthz), and acts as the hub's downstream
// client with an official SDK: the legacy SDK for a 2025 scenario, SDK v2 negotiating the modern
// era for a 2026-07-28 one. What the mock sees and scores is what the HUB sends it.
//
// Debugging: CONFCLIENT_HUB_LOG=FILE appends the hub's stderr (debug level) and the driver's
// own lines to FILE. CONFCLIENT_DEADLINE_MS (default 28000) bounds the whole run.
// CONFCLIENT_DOWNSTREAM=legacy|modern overrides the driver's era (below).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.join(ROOT, 'dist/src/cli/main.js');
const MODERN = '2026-07-28';

const url = process.argv.at(-1);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
const version = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION ?? '2025-11-25';
const context = process.env.MCP_CONFORMANCE_CONTEXT ? JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT) : {};
// CONFCLIENT_DOWNSTREAM=legacy|modern picks the driver's own era regardless of the scenario's
// (the hub translates between the eras, so either must satisfy the mock).
const modern = (process.env.CONFCLIENT_DOWNSTREAM ?? (version === MODERN ? 'modern' : 'legacy')) === 'modern';

// The suite kills the command after its --timeout (30 s by default) and scores what it saw;
// leave just before that so a hang shows up as this driver's own error.
const deadlineMs = Number(process.env.CONFCLIENT_DEADLINE_MS ?? 28_000);
/** The hub this driver started: stopped with it however it ends (an exit skips `finally`). */
let hubChild;
const leave = (code) => {
  if (hubChild && hubChild.exitCode === null && hubChild.signalCode === null) hubChild.kill('SIGKILL');
  process.exit(code);
};
const hardStop = setTimeout(() => {
  console.error(`client-driver: ${scenario} did not finish in ${deadlineMs} ms`);
  leave(2);
}, deadlineMs);
hardStop.unref();
// The suite's own timeout ends the command with a signal: the hub must not outlive it.
for (const sig of ['SIGTERM', 'SIGINT']) process.once(sig, () => leave(sig === 'SIGTERM' ? 143 : 130));

const hubLog = process.env.CONFCLIENT_HUB_LOG;
const log = (...a) => {
  console.error('client-driver:', ...a);
  if (hubLog) fs.appendFileSync(hubLog, `client-driver: ${a.join(' ')}\n`);
};

/**
 * What a user-facing client offers. The SDK fills an accepted form's omitted fields from the
 * schema's defaults (applyDefaults), so elicitation-sep1034-client-defaults checks that the hub
 * relays the requestedSchema with its defaults, and the answer back, intact.
 */
const CAPABILITIES = { roots: {}, sampling: {}, elicitation: { form: { applyDefaults: true } } };

/**
 * The SDK this run's client needs, loaded while the hub starts (main starts it first): loading
 * it is most of this driver's own start, and the hub is a process of its own.
 */
let sdk;
function loadSdk() {
  sdk ??= modern
    ? import('@modelcontextprotocol/client').then((m) => ({ modern: m }))
    : Promise.all([
        import('@modelcontextprotocol/sdk/client/index.js'),
        import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
        import('@modelcontextprotocol/sdk/types.js'),
      ]).then(([client, transport, types]) => ({ legacy: { ...client, ...transport, ...types } }));
  return sdk;
}

async function connectLegacy(hubUrl) {
  const { Client, StreamableHTTPClientTransport, ElicitRequestSchema, CreateMessageRequestSchema, ListRootsRequestSchema } = (await loadSdk()).legacy;
  const client = new Client({ name: 'conformance-client-driver', version: '1.0.0' }, { capabilities: CAPABILITIES });
  client.setRequestHandler(ElicitRequestSchema, async (req) => answerElicitation(req.params));
  client.setRequestHandler(CreateMessageRequestSchema, async () => SAMPLE);
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [] }));
  await client.connect(new StreamableHTTPClientTransport(new URL(hubUrl)));
  return client;
}

async function connectModern(hubUrl) {
  const { Client, StreamableHTTPClientTransport } = (await loadSdk()).modern;
  const client = new Client(
    { name: 'conformance-client-driver', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' }, capabilities: CAPABILITIES, inputRequired: { autoFulfill: true, maxRounds: 5 } },
  );
  client.setRequestHandler('elicitation/create', async (req) => answerElicitation(req.params));
  client.setRequestHandler('sampling/createMessage', async () => SAMPLE);
  client.setRequestHandler('roots/list', async () => ({ roots: [] }));
  await client.connect(new StreamableHTTPClientTransport(new URL(hubUrl)));
  if (client.getProtocolEra?.() !== 'modern') throw new Error(`the driver's client negotiated ${client.getProtocolEra?.()} with the hub`);
  return client;
}

const SAMPLE = { role: 'assistant', content: { type: 'text', text: 'sampled' }, model: 'driver', stopReason: 'endTurn' };

/** Accept; the mrtr mock asks for a `confirmed` boolean, everything else gets its defaults. */
function answerElicitation(params) {
  const props = params?.requestedSchema?.properties ?? {};
  const content = 'confirmed' in props ? { confirmed: true } : {};
  return { action: 'accept', content };
}

/** Scenarios whose mock lists no tools, or whose checks need no call. */
const NO_TOOLS = new Set(['initialize', 'request-metadata']);

/** The hub's tools, once it lists any (a client would re-list on list_changed; polling is simpler). */
async function listedTools(client) {
  for (;;) {
    const { tools } = await client.listTools();
    if (tools.length > 0) return { tools };
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** What the scenario needs a client to do, given the tools the hub lists. */
async function exercise(client) {
  const { tools } = NO_TOOLS.has(scenario) ? await client.listTools() : await listedTools(client);
  log('tools through the hub:', tools.map((t) => t.name).join(', ') || '(none)');
  const call = async (name, args = {}) => {
    const r = await client.callTool({ name, arguments: args });
    log(`${name} ->`, JSON.stringify(r).slice(0, 300));
    return r;
  };
  switch (scenario) {
    case 'tools_call':
      await call('add_numbers', { a: 5, b: 3 });
      break;
    case 'elicitation-sep1034-client-defaults':
      await call('test_client_elicitation_defaults');
      break;
    case 'sse-retry':
      await call('test_reconnection');
      break;
    case 'sep-2322-client-request-state':
      for (const name of ['test_mrtr_echo_state', 'test_mrtr_no_state', 'test_mrtr_unrelated', 'test_mrtr_no_result_type']) await call(name);
      break;
    case 'http-standard-headers': {
      for (const t of tools) await call(t.name);
      const { resources } = await client.listResources();
      for (const r of resources) await client.readResource({ uri: r.uri });
      const { prompts } = await client.listPrompts();
      for (const p of prompts) await client.getPrompt({ name: p.name });
      break;
    }
    case 'http-custom-headers':
      for (const tc of context.toolCalls ?? []) await call(tc.name, tc.arguments);
      break;
    case 'http-invalid-tool-headers':
      // Every tool the hub still lists gets called: the mock fails any invalid one that arrives.
      for (const t of tools) await call(t.name, Object.fromEntries(Object.keys(t.inputSchema?.properties ?? {}).map((k) => [k, 'x'])));
      break;
    case 'json-schema-ref-no-deref':
      // Calling it makes the hub validate the arguments against a schema with a network $ref.
      await call('lookup_user', { id: 'user-1' });
      break;
    case 'json-schema-2020-12-preservation': {
      const focal = tools.find((t) => t.name === 'json_schema_2020_12_tool');
      if (!focal) throw new Error('json_schema_2020_12_tool is not listed');
      await call('json_schema_echo', { schema: focal.inputSchema });
      break;
    }
    default:
      // initialize, request-metadata, json-schema-ref-no-deref: connecting and listing is the job;
      // any tool the mock offers besides is called once.
      for (const t of tools) if ((t.inputSchema?.required ?? []).length === 0) await call(t.name);
  }
}

/**
 * The client-credentials scenarios (auth/client-credentials-basic, -jwt) hand the client its
 * pre-registered credentials in MCP_CONFORMANCE_CONTEXT: client_id with client_secret, or with
 * private_key_pem and signing_algorithm. They become the upstream's `oauth` settings, the secret
 * and the key brought in by `${env:…}` as an operator would (the config file never holds them).
 *
 * Every other auth/* scenario is the authorization-code flow: the upstream gets
 * `oauth.grant: "authorization_code"` (with the context's pre-registered client_id and secret
 * when it gives one, and the suite's Client ID Metadata Document URL for auth/basic-cimd), and
 * the driver runs `switchyard login` once the hub runs (see login below).
 */
const CLIENT_CREDENTIALS = new Set(['auth/client-credentials-basic', 'auth/client-credentials-jwt']);
const AUTH_CODE = scenario.startsWith('auth/') && !CLIENT_CREDENTIALS.has(scenario);
/** The URL the suite's CIMD scenario expects as client_id (the SDK's own conformance client uses it too). */
const CIMD_URL = 'https://conformance-test.local/client-metadata.json';

function oauthFromContext() {
  if (AUTH_CODE) {
    const oauth = { grant: 'authorization_code' };
    const env = {};
    if (typeof context.client_id === 'string') {
      oauth.clientId = context.client_id;
      if (typeof context.client_secret === 'string') {
        oauth.clientSecret = '${env:CONFCLIENT_OAUTH_SECRET}';
        env.CONFCLIENT_OAUTH_SECRET = context.client_secret;
      }
    }
    if (scenario === 'auth/basic-cimd') oauth.clientMetadataUrl = CIMD_URL;
    return { oauth, env };
  }
  if (typeof context.client_id !== 'string') return { env: {} };
  if (typeof context.client_secret === 'string')
    return { oauth: { clientId: context.client_id, clientSecret: '${env:CONFCLIENT_OAUTH_SECRET}' }, env: { CONFCLIENT_OAUTH_SECRET: context.client_secret } };
  if (typeof context.private_key_pem === 'string') {
    const oauth = { clientId: context.client_id, privateKey: '${env:CONFCLIENT_OAUTH_KEY}', tokenEndpointAuth: 'private_key_jwt' };
    if (typeof context.signing_algorithm === 'string') oauth.signingAlgorithm = context.signing_algorithm;
    return { oauth, env: { CONFCLIENT_OAUTH_KEY: context.private_key_pem } };
  }
  return { env: {} };
}

/**
 * `switchyard login mock` against the running hub's config, as a user would after the hub said
 * the server needs a login; the suite's authorization server approves at once and redirects
 * straight back, so the opener (test/fixtures/follow-login.mjs) only fetches the URL and follows
 * the redirects. The login tells the hub (--url), which restarts the upstream with the tokens.
 */
function login(hub) {
  return new Promise((resolve, reject) => {
    const opener = `"${process.execPath}" "${path.join(ROOT, 'test/fixtures/follow-login.mjs')}"`;
    const child = spawn(process.execPath, [BIN, 'login', 'mock', '--config', hub.configFile, '--opener', opener, '--timeout', '20', '--url', hub.url], {
      cwd: ROOT,
      env: { ...process.env, ...hub.env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => {
      err += d;
      if (hubLog) fs.appendFileSync(hubLog, d);
    });
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`switchyard login exited ${code}: ${err.trim().split('\n').at(-1)}`))));
  });
}

/** The built hub on a free port, with the mock as its only upstream; resolves with its MCP URL. */
async function startHub(dir) {
  const configFile = path.join(dir, 'hub.config.json');
  // probeTimeoutMs: the mock checks every message against the spec's JSON schema, and its first
  // answer can take seconds on a loaded machine (past the default 5 s the first start fails).
  const config = { ledger: { path: path.join(dir, 'ledger.db') }, servers: { mock: { url, prefix: '', probeTimeoutMs: 20_000 } } };
  const { oauth, env: oauthEnv } = oauthFromContext();
  if (oauth) config.servers.mock.oauth = oauth;
  fs.writeFileSync(configFile, JSON.stringify(config, null, 2));
  // At least info: the "switchyard listening" line says where it listens. Without a log file,
  // only its warnings and errors reach the suite's output.
  const child = spawn(process.execPath, [BIN, 'start', '--config', configFile, '--port', '0'], {
    cwd: ROOT,
    env: { ...process.env, ...oauthEnv, SWITCHYARD_LOG_LEVEL: hubLog ? 'debug' : 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  hubChild = child;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const hubUrl = await new Promise((resolve, reject) => {
    let buf = '';
    child.stderr.on('data', (chunk) => {
      if (hubLog) fs.appendFileSync(hubLog, chunk);
      buf += chunk;
      const lines = buf.split('\n');
      buf = lines.pop();
      for (const line of lines) {
        let entry;
        try {
          entry = JSON.parse(line);
        } catch {
          entry = { level: 50 };
        }
        if (entry.msg === 'switchyard listening') resolve(entry.url);
        if (!hubLog && entry.level >= 40) process.stderr.write(`${line}\n`);
      }
    });
    exited.then((code) => reject(new Error(`the hub exited (${code}) before it listened`)));
  });
  return {
    url: hubUrl,
    configFile,
    env: oauthEnv,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Waits until /healthz shows the upstream ready; a first start that failed is the hub's to report. */
async function upstreamReady(hubUrl) {
  for (;;) {
    const { servers } = await (await fetch(new URL('/healthz', hubUrl))).json();
    const s = servers?.[0];
    if (s?.state === 'ready') return;
    if (s?.state === 'failed') throw new Error(`the hub could not start the upstream: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main() {
  if (!url || !/^https?:\/\//.test(url)) throw new Error(`usage: client-driver.mjs URL (got ${url})`);
  if (!fs.existsSync(BIN)) throw new Error('dist/ is missing: build the hub first (npx tsc -p .)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-confclient-'));
  let hub;
  // Loaded meanwhile; a failure to load shows where it is awaited.
  loadSdk().catch(() => undefined);
  try {
    hub = await startHub(dir);
    if (AUTH_CODE) await login(hub);
    await upstreamReady(hub.url);
    const client = modern ? await connectModern(hub.url) : await connectLegacy(hub.url);
    try {
      await exercise(client);
    } finally {
      await client.close();
    }
  } finally {
    await hub?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    log(`${scenario}: ${err?.stack ?? err}`);
    process.exit(1);
  },
);
