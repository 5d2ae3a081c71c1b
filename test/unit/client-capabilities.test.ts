/**
 * What a client's declared capabilities let a server → client request ask (digest §2.1, §5.1;
 * src/protocol/client-capabilities.ts): elicitation by mode (`{}` is form only), sampling with
 * tools only under `sampling.tools`, roots; and the capability a refusal names.
 */
import { describe, expect, it } from 'vitest';
import { addRequired, declares, elicits, required } from '../../src/protocol/client-capabilities.js';
import { InputCollector } from '../../src/router/input-bridge.js';

describe('client capabilities', () => {
  it.each([
    [{}, false, false],
    [{ elicitation: {} }, true, false],
    [{ elicitation: { form: {} } }, true, false],
    [{ elicitation: { url: {} } }, false, true],
    [{ elicitation: { form: {}, url: {} } }, true, true],
  ])('%j: form %s, url %s', (caps, form, url) => {
    expect(elicits(caps, 'form')).toBe(form);
    expect(elicits(caps, 'url')).toBe(url);
    expect(declares(caps, 'elicitation/create', { message: 'm' })).toBe(form);
    expect(declares(caps, 'elicitation/create', { mode: 'form', message: 'm' })).toBe(form);
    expect(declares(caps, 'elicitation/create', { mode: 'url', url: 'https://x' })).toBe(url);
  });

  it('sampling with tools needs sampling.tools; roots need roots; other methods are never declared', () => {
    expect(declares({ sampling: {} }, 'sampling/createMessage', { messages: [] })).toBe(true);
    expect(declares({ sampling: {} }, 'sampling/createMessage', { messages: [], tools: [] })).toBe(false);
    expect(declares({ sampling: { tools: {} } }, 'sampling/createMessage', { messages: [], tools: [] })).toBe(true);
    // A toolChoice alone makes it tool-enabled too (SDK 1.x refuses either without sampling.tools).
    expect(declares({ sampling: {} }, 'sampling/createMessage', { messages: [], toolChoice: { mode: 'none' } })).toBe(false);
    expect(declares({ sampling: { tools: {} } }, 'sampling/createMessage', { messages: [], toolChoice: { mode: 'none' } })).toBe(true);
    expect(declares({}, 'sampling/createMessage', {})).toBe(false);
    expect(declares({ roots: {} }, 'roots/list')).toBe(true);
    expect(declares({}, 'roots/list')).toBe(false);
    expect(declares({ elicitation: {}, sampling: {}, roots: {} }, 'tasks/get')).toBe(false);
  });

  it('names what would have to be declared', () => {
    expect(required('elicitation/create', {})).toEqual({ elicitation: { form: {} } });
    expect(required('elicitation/create', { mode: 'url' })).toEqual({ elicitation: { url: {} } });
    expect(required('sampling/createMessage', { tools: [] })).toEqual({ sampling: { tools: {} } });
    expect(required('sampling/createMessage', {})).toEqual({ sampling: {} });
    expect(required('sampling/createMessage', { toolChoice: { mode: 'auto' } })).toEqual({ sampling: { tools: {} } });
    expect(required('roots/list')).toEqual({ roots: {} });
  });

  it('what several requests need, merged within a family', () => {
    const need = addRequired(addRequired({}, required('elicitation/create', { mode: 'form' })), required('elicitation/create', { mode: 'url' }));
    expect(addRequired(need, required('roots/list'))).toEqual({ elicitation: { form: {}, url: {} }, roots: {} });
    // A method named __proto__ is a family of its own, not the object's prototype.
    const odd = addRequired({}, required('__proto__'));
    expect(Object.getPrototypeOf(odd)).toBe(Object.prototype);
    expect(Object.keys(odd)).toEqual(['__proto__']);
  });

  it("a legacy upstream's two questions the client cannot take: both named in its -32021", async () => {
    const c = new InputCollector({});
    await Promise.allSettled([c.ask({ method: 'elicitation/create', params: { mode: 'form', message: 'm' } }), c.ask({ method: 'elicitation/create', params: { mode: 'url', message: 'm', url: 'https://example.com' } })]);
    expect(c.missing).toEqual({ elicitation: { form: {}, url: {} } });
  });
});
