/**
 * Acceptance: the 2×2 era matrix with real peers. One hub aggregates legacy (SDK v1) and
 * modern-only (SDK v2) upstreams over stdio and HTTP plus two npm servers; an SDK v1 client
 * (legacy) and an SDK v2 client (auto negotiation, must end up modern) each list, call, get,
 * read and complete through it, and the raw wire answers carry the fields of the client's era.
 */
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import {
  CACHEABLE,
  LEGACY_VERSION,
  META_SERVER_INFO,
  META_VERSION,
  MODERN_VERSION,
  recordingFetch,
  resultsOf,
  waitForReady,
  type Json,
  type WireExchange,
} from '../helpers/wire.js';

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
const SDK2 = 'test/fixtures/servers/sdk2-modern-server.mjs';
/** The four fixture upstreams: SDK v1 legacy and SDK v2 modern-only, each over stdio and HTTP. */
const FIXTURES = ['s1stdio', 's1http', 's2stdio', 's2http'] as const;
const FIXTURE_TOOLS = ['echo', 'add', 'counter_bump', 'slow', 'fail'];
const MEMORY_TOOLS = ['create_entities', 'create_relations', 'add_observations', 'delete_entities', 'delete_observations', 'delete_relations', 'read_graph', 'search_nodes', 'open_nodes'];
const FS_TOOLS = [
  'read_file',
  'read_text_file',
  'read_media_file',
  'read_multiple_files',
  'write_file',
  'edit_file',
  'create_directory',
  'list_directory',
  'list_directory_with_sizes',
  'directory_tree',
  'move_file',
  'search_files',
  'get_file_info',
  'list_allowed_directories',
];
const ALL_IDS = [...FIXTURES, 'memory', 'fs'];

/** The calls both SDK clients share (their parameter types differ, the wire does not). */
interface Peer {
  listTools(p?: Json): Promise<Json>;
  callTool(p: Json): Promise<Json>;
  listPrompts(p?: Json): Promise<Json>;
  getPrompt(p: Json): Promise<Json>;
  listResources(p?: Json): Promise<Json>;
  listResourceTemplates(p?: Json): Promise<Json>;
  readResource(p: Json): Promise<Json>;
  complete(p: Json): Promise<Json>;
  close(): Promise<void>;
}

interface Connected {
  peer: Peer;
  /** What the client itself says it negotiated. */
  era: { era: string | undefined; version: string | undefined; sessionId: string | undefined };
}

interface ClientSpec {
  label: string;
  tag: 'v1' | 'v2';
  era: 'legacy' | 'modern';
  connect(url: string, fetchFn: typeof fetch): Promise<Connected>;
}

const CLIENTS: ClientSpec[] = [
  {
    label: 'SDK v1 client (legacy)',
    tag: 'v1',
    era: 'legacy',
    async connect(url, fetchFn) {
      const client = new ClientV1({ name: 'matrix-v1', version: '1.0.0' });
      const transport = new TransportV1(new URL(url), { fetch: fetchFn });
      await client.connect(transport);
      return {
        peer: client as unknown as Peer,
        // SDK v1 has no era getter: its transport carries the negotiated version and session.
        era: { era: undefined, version: transport.protocolVersion, sessionId: transport.sessionId },
      };
    },
  },
  {
    label: 'SDK v2 client (auto negotiation → modern)',
    tag: 'v2',
    era: 'modern',
    async connect(url, fetchFn) {
      const client = new ClientV2({ name: 'matrix-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
      const transport = new TransportV2(new URL(url), { fetch: fetchFn });
      await client.connect(transport);
      return {
        peer: client as unknown as Peer,
        era: { era: client.getProtocolEra(), version: client.getNegotiatedProtocolVersion(), sessionId: transport.sessionId },
      };
    },
  },
];

/** A result without the era envelope (checked on the wire separately). */
function bare(r: Json): Json {
  const { _meta: _m, resultType: _r, ttlMs: _t, cacheScope: _c, ...rest } = r;
  return rest;
}

async function allPages(list: (p?: Json) => Promise<Json>, key: string): Promise<Json[]> {
  const items: Json[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 50; page++) {
    const r = await list(cursor === undefined ? undefined : { cursor });
    items.push(...(r[key] as Json[]));
    if (typeof r.nextCursor !== 'string') return items;
    cursor = r.nextCursor;
  }
  throw new Error(`${key}: more than 50 pages`);
}

const byField = (f: string) => (a: Json, b: Json) => String(a[f]).localeCompare(String(b[f]));
const text = (t: string) => ({ type: 'text', text: t });

describe('era matrix: SDK v1 and SDK v2 clients through one hub of legacy and modern upstreams', () => {
  let dir: string;
  let filesDir: string;
  let hub: HubProcess;
  let http1: HttpFixture;
  let http2: HttpFixture;

  beforeAll(async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-matrix-')));
    filesDir = join(dir, 'files');
    mkdirSync(filesDir);
    writeFileSync(join(filesDir, 'hello.txt'), 'hi from the filesystem\n');
    const counter = join(dir, 'counter.json');
    [http1, http2] = await Promise.all([
      startHttpFixture(SDK1, { SERVER_NAME: 'sdk1-http', COUNTER_FILE: counter }),
      startHttpFixture(SDK2, { SERVER_NAME: 'sdk2-http', COUNTER_FILE: counter }),
    ]);
    hub = await startHub(
      {
        servers: {
          s1stdio: nodeServer(SDK1, [], { SERVER_NAME: 'sdk1-stdio', COUNTER_FILE: counter }),
          s1http: { url: http1.url },
          s2stdio: nodeServer(SDK2, [], { SERVER_NAME: 'sdk2-stdio', COUNTER_FILE: counter }),
          s2http: { url: http2.url },
          // Trusted, so its own annotations reach clients (untrusted servers' get the conservative ones).
          memory: { command: join(ROOT, 'node_modules/.bin/mcp-server-memory'), env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') }, trust: 'trusted' },
          fs: { command: join(ROOT, 'node_modules/.bin/mcp-server-filesystem'), args: [filesDir], prefix: 'files' },
        },
      },
      { dir },
    );
    const h = await waitForReady(hub.url, ALL_IDS);
    // The hub saw each upstream's real era.
    const eras = Object.fromEntries(h.servers.map((s) => [s.id, s.era]));
    expect(eras).toEqual({
      s1stdio: LEGACY_VERSION,
      s1http: LEGACY_VERSION,
      s2stdio: MODERN_VERSION,
      s2http: MODERN_VERSION,
      memory: LEGACY_VERSION,
      fs: LEGACY_VERSION,
    });
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
    await Promise.all([http1?.stop(), http2?.stop()]);
  });

  for (const spec of CLIENTS) {
    describe(spec.label, () => {
      let peer: Peer;
      let negotiated: Connected['era'];
      const wire = recordingFetch();

      beforeAll(async () => {
        ({ peer, era: negotiated } = await spec.connect(hub.url, wire.fetch));
      });
      afterAll(async () => {
        await peer?.close();
      });

      it(`negotiates the ${spec.era} era with the hub`, async () => {
        const exchanges = await wire.settled();
        const methods = exchanges.map((e) => e.request.method);
        if (spec.era === 'legacy') {
          expect(negotiated.version).toBe(LEGACY_VERSION);
          expect(negotiated.sessionId).toMatch(/\S/);
          expect(methods[0]).toBe('initialize');
          expect(exchanges[0].headers.get('mcp-session-id')).toBe(negotiated.sessionId);
          expect(exchanges[0].messages[0].result).toMatchObject({ protocolVersion: LEGACY_VERSION, serverInfo: { name: 'switchyard' } });
        } else {
          expect(negotiated.era).toBe('modern');
          expect(negotiated.version).toBe(MODERN_VERSION);
          expect(negotiated.sessionId).toBeUndefined();
          expect(methods).not.toContain('initialize');
          expect(methods[0]).toBe('server/discover');
        }
      });

      it('lists every upstream’s tools under its prefix', async () => {
        const tools = await allPages((p) => peer.listTools(p), 'tools');
        const expected = [
          ...FIXTURES.flatMap((p) => FIXTURE_TOOLS.map((t) => `${p}__${t}`)),
          ...MEMORY_TOOLS.map((t) => `memory__${t}`),
          ...FS_TOOLS.map((t) => `files__${t}`),
        ];
        expect(tools.map((t) => t.name).sort()).toEqual(expected.sort());
        const byName = new Map(tools.map((t) => [t.name as string, t]));
        for (const p of FIXTURES) {
          expect(byName.get(`${p}__add`)).toMatchObject({
            description: 'Add two numbers',
            inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
            outputSchema: { type: 'object', properties: { sum: { type: 'number' } }, required: ['sum'] },
          });
        }
        expect(byName.get('memory__read_graph')).toMatchObject({ title: 'Read Graph', annotations: { readOnlyHint: true } });
        expect(byName.get('files__read_text_file')).toMatchObject({ title: 'Read Text File', inputSchema: { required: ['path'] } });
      });

      it('calls tools on the four fixture upstreams with exact results', async () => {
        for (const p of FIXTURES) {
          expect(bare(await peer.callTool({ name: `${p}__echo`, arguments: { text: `hi ${p}` } }))).toEqual({ content: [text(`echo:hi ${p}`)] });
          expect(bare(await peer.callTool({ name: `${p}__add`, arguments: { a: 2, b: 40 } }))).toEqual({ content: [text('42')], structuredContent: { sum: 42 } });
          const label = `${spec.tag}-${p}`;
          expect(bare(await peer.callTool({ name: `${p}__counter_bump`, arguments: { label } }))).toEqual({
            content: [text('1')],
            structuredContent: { label, count: 1 },
          });
          expect(bare(await peer.callTool({ name: `${p}__fail`, arguments: {} }))).toEqual({ isError: true, content: [text('failure requested')] });
        }
      });

      it('calls tools on npm server-memory and server-filesystem', async () => {
        const entity = { name: `${spec.tag}-entity`, entityType: 'test', observations: [`created by ${spec.tag}`] };
        expect(bare(await peer.callTool({ name: 'memory__create_entities', arguments: { entities: [entity] } }))).toEqual({
          content: [text(JSON.stringify([entity], null, 2))],
          structuredContent: { entities: [entity] },
        });
        const graph = { entities: [entity], relations: [] };
        expect(bare(await peer.callTool({ name: 'memory__open_nodes', arguments: { names: [entity.name] } }))).toEqual({
          content: [text(JSON.stringify(graph, null, 2))],
          structuredContent: graph,
        });

        const file = join(filesDir, 'hello.txt');
        expect(bare(await peer.callTool({ name: 'files__read_text_file', arguments: { path: file } }))).toEqual({
          content: [text('hi from the filesystem\n')],
          structuredContent: { content: 'hi from the filesystem\n' },
        });
        expect(bare(await peer.callTool({ name: 'files__list_directory', arguments: { path: filesDir } }))).toEqual({
          content: [text('[FILE] hello.txt')],
          structuredContent: { content: '[FILE] hello.txt' },
        });
        const allowed = `Allowed directories:\n${filesDir}`;
        expect(bare(await peer.callTool({ name: 'files__list_allowed_directories', arguments: {} }))).toEqual({
          content: [text(allowed)],
          structuredContent: { content: allowed },
        });
      });

      it('lists and gets prompts and completes their arguments on every fixture upstream', async () => {
        const prompts = await allPages((p) => peer.listPrompts(p), 'prompts');
        // memory and filesystem offer no prompts.
        expect(prompts.sort(byField('name'))).toEqual(
          FIXTURES.map((p) => ({ name: `${p}__greet`, description: 'Greet someone', arguments: [{ name: 'name', required: true }] })).sort(byField('name')),
        );
        for (const p of FIXTURES) {
          expect(bare(await peer.getPrompt({ name: `${p}__greet`, arguments: { name: `bob-${p}` } }))).toEqual({
            messages: [{ role: 'user', content: text(`Hello, bob-${p}!`) }],
          });
          expect(bare(await peer.complete({ ref: { type: 'ref/prompt', name: `${p}__greet` }, argument: { name: 'name', value: 'al' } }))).toEqual({
            completion: { values: ['alice', 'albert'], total: 2, hasMore: false },
          });
          expect(bare(await peer.complete({ ref: { type: 'ref/prompt', name: `${p}__greet` }, argument: { name: 'name', value: 'b' } }))).toEqual({
            completion: { values: ['bob'], total: 1, hasMore: false },
          });
        }
      });

      it('lists resources and templates and reads them', async () => {
        const resources = await allPages((p) => peer.listResources(p), 'resources');
        // The HTTP instances of each fixture publish the same URIs as the stdio ones (fixed
        // schemes sdk1:// and sdk2://): the hub keeps the first owner in config order.
        expect(resources.sort(byField('uri'))).toEqual(
          [
            { name: 'hello', uri: 'sdk1://static/hello', description: 'A static greeting', mimeType: 'text/plain' },
            { name: 'hello', uri: 'sdk2://static/hello', description: 'A static greeting', mimeType: 'text/plain' },
            {
              name: 'knowledge-graph',
              title: 'Knowledge Graph',
              uri: 'memory://knowledge-graph',
              description: 'The full knowledge graph with all entities and relations',
              mimeType: 'application/json',
            },
          ].sort(byField('uri')),
        );
        const templates = await allPages((p) => peer.listResourceTemplates(p), 'resourceTemplates');
        expect(templates.sort(byField('uriTemplate'))).toEqual([
          { name: 'item', uriTemplate: 'sdk1://item/{id}', description: 'An item by id', mimeType: 'text/plain' },
          { name: 'item', uriTemplate: 'sdk2://item/{id}', description: 'An item by id', mimeType: 'text/plain' },
        ]);

        const read = async (uri: string) => bare(await peer.readResource({ uri }));
        expect(await read('sdk1://static/hello')).toEqual({ contents: [{ uri: 'sdk1://static/hello', mimeType: 'text/plain', text: 'hello from sdk1-stdio' }] });
        expect(await read('sdk2://static/hello')).toEqual({ contents: [{ uri: 'sdk2://static/hello', mimeType: 'text/plain', text: 'hello from sdk2-stdio' }] });
        expect(await read(`sdk1://item/${spec.tag}-7`)).toEqual({ contents: [{ uri: `sdk1://item/${spec.tag}-7`, mimeType: 'text/plain', text: `item ${spec.tag}-7` }] });
        expect(await read(`sdk2://item/${spec.tag}-9`)).toEqual({ contents: [{ uri: `sdk2://item/${spec.tag}-9`, mimeType: 'text/plain', text: `item ${spec.tag}-9` }] });

        // The knowledge graph resource is exactly what read_graph reports, and holds this client's entity.
        const graph = (await peer.callTool({ name: 'memory__read_graph', arguments: {} })).structuredContent as Json;
        expect(graph.entities).toContainEqual({ name: `${spec.tag}-entity`, entityType: 'test', observations: [`created by ${spec.tag}`] });
        expect(await read('memory://knowledge-graph')).toEqual({
          contents: [{ uri: 'memory://knowledge-graph', mimeType: 'application/json', text: JSON.stringify(graph, null, 2) }],
        });
      });

      it(`puts only ${spec.era}-era fields on the wire`, async () => {
        const exchanges: WireExchange[] = await wire.settled();
        const results = resultsOf(exchanges);
        const methods = new Set(results.map((r) => r.method));
        for (const m of ['tools/list', 'tools/call', 'prompts/list', 'prompts/get', 'resources/list', 'resources/templates/list', 'resources/read', 'completion/complete'])
          expect(methods, m).toContain(m);
        // No request of this client failed at the JSON-RPC level.
        for (const ex of exchanges) for (const m of ex.messages) expect(m.error, `${ex.request.method}: ${JSON.stringify(m.error)}`).toBeUndefined();

        if (spec.era === 'legacy') {
          for (const { method, result } of results) {
            expect(result, method).not.toHaveProperty('resultType');
            expect(result, method).not.toHaveProperty('ttlMs');
            expect(result, method).not.toHaveProperty('cacheScope');
          }
          for (const ex of exchanges) {
            if (ex.request.method === 'initialize') continue;
            expect((ex.request.params?._meta as Json | undefined)?.[META_VERSION], ex.request.method).toBeUndefined();
          }
          return;
        }
        for (const ex of exchanges) {
          expect(ex.request.params?._meta, ex.request.method).toMatchObject({ [META_VERSION]: MODERN_VERSION });
          expect(ex.headers.get('mcp-session-id'), ex.request.method).toBeNull();
        }
        for (const { method, result } of results) {
          expect(result.resultType, method).toBe('complete');
          expect((result._meta as Json | undefined)?.[META_SERVER_INFO], method).toMatchObject({ name: 'switchyard' });
          if (CACHEABLE.has(method)) {
            expect(Number.isInteger(result.ttlMs) && (result.ttlMs as number) >= 0, `${method} ttlMs=${String(result.ttlMs)}`).toBe(true);
            expect(['public', 'private'], `${method} cacheScope`).toContain(result.cacheScope);
          } else {
            expect(result, method).not.toHaveProperty('ttlMs');
            expect(result, method).not.toHaveProperty('cacheScope');
          }
        }
        expect(methods).toContain('server/discover');
      });
    });
  }
});
