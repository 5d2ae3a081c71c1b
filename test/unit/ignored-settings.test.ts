import { describe, expect, it } from 'vitest';
import { ignoredSettings } from '../../src/config/ignored-settings.js';
import type { ServerConfig } from '../../src/config/types.js';

const server = (s: Partial<ServerConfig>) => ({ trust: 'untrusted', ...s }) as ServerConfig;

describe('ignoredSettings', () => {
  it('names autoApprove on a server that is not trusted, and nothing else', () => {
    const said = ignoredSettings({
      servers: { u: server({ autoApprove: true }), t: server({ trust: 'trusted', autoApprove: true }), f: server({ autoApprove: false }), n: server({}) },
    });
    expect(said).toEqual([expect.stringMatching(/^servers\.u\.autoApprove is ignored: it applies only to a server with "trust": "trusted"/)]);
  });
});
