/**
 * What the user is shown when the hub asks to confirm a risky call (policy.confirm): the
 * arguments the call would run with, none of them out of sight. The arguments are the model's
 * (a prompt injection's, at worst), and the confirmation is the user's one look at them: a long
 * value first must not push the one that matters (a path, a flag) past the end of the message,
 * and invisible characters (bidi overrides, Unicode tags) must not make the text read as other
 * than it is. Real peers: SDK clients of both eras answering the hub's elicitation, a legacy
 * upstream whose `echo` takes any arguments.
 */
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';

const TOOL = 'quirk__echo';

describe("the confirmation of a risky call shows the user every argument", () => {
  let hub: HubProcess;

  beforeAll(async () => {
    hub = await startHub({
      policy: { confirm: [TOOL, 'echo'] },
      // Its tools keep their names (no prefix): only the question can say whose `echo` it is.
      servers: { quirk: nodeServer('test/fixtures/quirks/legacy-32601.mjs'), bare: { ...nodeServer('test/fixtures/quirks/legacy-32601.mjs'), prefix: '' } },
    });
    await waitForReady(hub.url, ['quirk', 'bare']);
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
  });

  /** The message of the hub's confirmation for a call with `args`, which the client declines (nothing runs). */
  async function asked(era: 'legacy' | 'modern', args: Record<string, unknown>, tool = TOOL): Promise<string> {
    const messages: string[] = [];
    let c: V1Client | V2Client;
    if (era === 'legacy') {
      const v1 = new V1Client({ name: 'legacy-confirm-summary', version: '1' }, { capabilities: { elicitation: {} } });
      v1.setRequestHandler(ElicitRequestSchema, async (req) => {
        messages.push(String(req.params.message));
        return { action: 'decline' };
      });
      await v1.connect(new V1Transport(new URL(hub.url)));
      c = v1;
    } else {
      const v2 = new V2Client({ name: 'modern-confirm-summary', version: '1' }, { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } } });
      v2.setRequestHandler('elicitation/create', async (req) => {
        messages.push(String((req.params as { message?: string }).message));
        return { action: 'decline' };
      });
      await v2.connect(new V2Transport(new URL(hub.url)));
      c = v2;
    }
    try {
      const r = (await c.callTool({ name: tool, arguments: args })) as { isError?: boolean; content: { text: string }[] };
      expect(r.isError).toBe(true);
      expect(r.content[0]?.text).toMatch(/declined by the user/);
    } finally {
      await c.close();
    }
    expect(messages).toHaveLength(1);
    return messages[0]!;
  }

  for (const era of ['legacy', 'modern'] as const) {
    it(`${era} client: the question names the server whose tool it is, which a tool without a prefix does not`, async () => {
      expect((await asked(era, { text: 'x' }, 'echo')).split('\n')[0]).toBe('Allow the tool "echo" of the server "bare" to run with these arguments?');
      expect((await asked(era, { text: 'x' })).split('\n')[0]).toBe(`Allow the tool "${TOOL}" of the server "quirk" to run with these arguments?`);
    });

    it(`${era} client: a long argument is shortened, saying by how much, and the arguments after it are all there`, async () => {
      const note = `Routine cleanup. ${'All of this is harmless. '.repeat(60)}The end of the note.`;
      const message = await asked(era, { note, path: '/home/user/.ssh/authorized_keys', mode: 'overwrite' });
      expect(message).toContain(TOOL);
      expect(message).toContain('"path":"/home/user/.ssh/authorized_keys"');
      expect(message).toContain('"mode":"overwrite"');
      // The long one: its start and its end, and how long it is, not all of it.
      expect(message).toContain('Routine cleanup.');
      expect(message).toContain('The end of the note.');
      expect(message).toContain(`${note.length.toLocaleString('en-US')} characters`);
      expect(message).not.toContain(note);
      expect(message.length).toBeLessThan(1000);
    });

    it(`${era} client: invisible characters (a bidi override, Unicode tags) are shown as escapes, not as text that reads otherwise`, async () => {
      // U+202E makes "txt.exe" display as "exe.txt"; tag characters (U+E0000 block) display as nothing.
      const tags = [...'rm -rf ~'].map((ch) => String.fromCodePoint(0xe0000 + ch.charCodeAt(0))).join('');
      const message = await asked(era, { file: 'report\u202etxt.exe', comment: `fine${tags}` });
      expect(message).not.toMatch(/[\u202e\u{e0000}-\u{e007f}]/u);
      expect(message).toContain('report\\u202etxt.exe');
      expect(message).toContain('fine\\udb40\\udc72');
    });
  }

  it('arguments too many to show end the message saying how much is left out', async () => {
    const args: Record<string, unknown> = {};
    for (let i = 0; i < 200; i++) args[`field${i}`] = `value number ${i}`;
    args.last = 'the last one';
    const message = await asked('modern', args);
    expect(message).toContain('"field0":"value number 0"');
    expect(message).toMatch(/… \(\d[\d,]* more characters of the arguments not shown\)$/);
    expect(message.length).toBeLessThan(3000);
  });
});
