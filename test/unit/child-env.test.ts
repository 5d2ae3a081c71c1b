import { describe, expect, it } from 'vitest';
import { childEnv } from '../../src/transport/child-env.js';

const parent = { PATH: '/bin', HOME: '/home/u', LANG: 'C.UTF-8', AWS_SECRET_ACCESS_KEY: 'aws', GITHUB_TOKEN: 'gh', AWS_REGION: 'eu', NODE_OPTIONS: '--x', UNSET: undefined };

describe('the environment of a stdio upstream (childEnv)', () => {
  it('by default: the baseline only, never what else the hub holds, and the config env over it', () => {
    expect(childEnv(parent, undefined, { TOKEN: 't', PATH: '/own' })).toEqual({ PATH: '/own', HOME: '/home/u', LANG: 'C.UTF-8', TOKEN: 't' });
  });
  it('inheritEnv names and PREFIX* add to the baseline', () => {
    expect(childEnv(parent, ['NODE_OPTIONS', 'AWS_*'])).toEqual({ PATH: '/bin', HOME: '/home/u', LANG: 'C.UTF-8', NODE_OPTIONS: '--x', AWS_SECRET_ACCESS_KEY: 'aws', AWS_REGION: 'eu' });
    expect(childEnv(parent, [])).toEqual({ PATH: '/bin', HOME: '/home/u', LANG: 'C.UTF-8' });
  });
  it('true passes everything set; false nothing but the config env', () => {
    expect(childEnv(parent, true, { A: '1' })).toEqual({ PATH: '/bin', HOME: '/home/u', LANG: 'C.UTF-8', AWS_SECRET_ACCESS_KEY: 'aws', GITHUB_TOKEN: 'gh', AWS_REGION: 'eu', NODE_OPTIONS: '--x', A: '1' });
    expect(childEnv(parent, false, { A: '1' })).toEqual({ A: '1' });
  });
  it('keeps a variable named __proto__, from the config env and from the hub environment (it was dropped)', () => {
    const own = JSON.parse('{"__proto__": "mine", "A": "1"}') as Record<string, string>;
    const hubEnv = JSON.parse('{"__proto__": "hub", "PATH": "/bin"}') as Record<string, string>;
    expect(Object.entries(childEnv(parent, false, own))).toEqual([['__proto__', 'mine'], ['A', '1']]);
    expect(Object.entries(childEnv(hubEnv, true))).toEqual([['__proto__', 'hub'], ['PATH', '/bin']]);
    expect(Object.entries(childEnv(hubEnv, ['__proto__']))).toEqual([['PATH', '/bin'], ['__proto__', 'hub']]);
  });
});
