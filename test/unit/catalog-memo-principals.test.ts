/**
 * The memo of built lists is keyed by which connection each server's part came from; a subject
 * is free text (an OAuth `sub` may hold `,` and `=`), and joined as plain text
 * "alice,w2=principal:alice" spelled alice's key. A list was still its own (a memo entry is
 * reused only for the same list entries), but calls were routed by the aggregate last built
 * under the key, which could be alice's: the key is JSON now. Real Catalog; stand-in upstream
 * connections.
 */
import { EventEmitter } from 'node:events';
import { expect, it } from 'vitest';
import { Catalog } from '../../src/catalog/catalog.js';
import { NameAssigner } from '../../src/catalog/names.js';
import { principalConn } from '../../src/catalog/principal-conn.js';
import { silentLogger } from '../../src/log.js';
import { MODERN } from '../../src/protocol/era.js';
import { serverConfig } from '../integration/catalog-helpers.js';

function fake(tools: string[]): any {
  const u: any = new EventEmitter();
  u.state = 'ready';
  u.era = MODERN;
  u.capabilities = { tools: {} };
  u.request = async (m: string) => (m === 'tools/list' ? { tools: tools.map((name) => ({ name, inputSchema: { type: 'object' } })) } : {});
  return u;
}

/**
 * Two servers: w1, where every principal has a connection of its own; w2, where only alice has
 * one (her configured credentials) and everyone else shares the server's.
 */
function twoServers(): Catalog {
  const w1 = { main: fake(['echo']), own: new Map<string, any>() };
  const w2 = { main: fake(['echo']), alice: fake(['echo', 'secret']) };
  const h1: any = { id: 'w1', config: serverConfig('w1'), upstream: w1.main };
  const h2: any = { id: 'w2', config: serverConfig('w2'), upstream: w2.main };
  return new Catalog(() => [h1, h2], new NameAssigner(), silentLogger, {
    connection: (h, pr) => {
      if (pr === undefined) return { credential: '', upstream: h.upstream };
      if (h.id === 'w1') {
        if (!w1.own.has(pr)) w1.own.set(pr, fake(['echo']));
        return { credential: principalConn(pr), upstream: w1.own.get(pr) };
      }
      return pr === 'alice' ? { credential: principalConn(pr), upstream: w2.alice } : { credential: '', upstream: w2.main };
    },
  });
}

it("a subject that spells another principal's connections gets its own list, not theirs", async () => {
  const c = twoServers();
  const names = async (principal: string) => (await c.aggregate('tools', { principal })).items.map((i: any) => i.name).sort();
  expect(await names('alice')).toEqual(['w1__echo', 'w2__echo', 'w2__secret']);
  expect(await names('alice,w2=principal:alice')).toEqual(['w1__echo', 'w2__echo']);
  expect(await names('bob')).toEqual(['w1__echo', 'w2__echo']);
  c.close();
});

it("a subject that spells another principal's connections is never routed by that principal's list", async () => {
  const c = twoServers();
  const mallory = 'alice,w2=principal:alice';
  // mallory lists first, then alice: the aggregate built last "for mallory" must still be hers.
  await c.aggregate('tools', { principal: mallory });
  await c.aggregate('tools', { principal: 'alice' });
  expect(c.readyTool('w2__secret', { principal: mallory })).toBeUndefined();
  expect(c.readyTool('w2__secret', { principal: 'alice' })?.upstreamName).toBe('secret');
  expect(await c.resolveTool('w2__secret', { principal: mallory })).toBeUndefined();
  c.close();
});
