/**
 * The Host check (DNS-rebinding defence): a Host header is a host and an optional `:port`,
 * nothing else. An IPv6 literal is `[…]` followed by nothing or a port: `[::1]x.evil.com` is
 * not loopback.
 */
import { describe, expect, it } from 'vitest';
import { hostAllowed } from '../../src/downstream/origin.js';

const LOOPBACK = { listenHost: '127.0.0.1', allowedOrigins: [] };
const PUBLIC = { listenHost: 'hub.example.com', allowedOrigins: ['https://app.example.com'] };

describe('the Host check', () => {
  it('takes loopback names and addresses, with or without a port', () => {
    for (const h of ['127.0.0.1', '127.0.0.1:7410', 'localhost', 'LOCALHOST:80', '[::1]', '[::1]:7410', '[::1]:', '127.8.9.10:1'])
      expect(hostAllowed(h, LOOPBACK), h).toBe(true);
  });

  it('takes the listen host and the hosts of allowed origins', () => {
    for (const h of ['hub.example.com', 'Hub.Example.com:443', 'app.example.com:8443']) expect(hostAllowed(h, PUBLIC), h).toBe(true);
  });

  it('takes an IPv6 listen host however it is written, in the config and in the Host header', () => {
    for (const listenHost of ['2001:db8::1', '2001:DB8:0:0::1', '[2001:db8::1]'])
      for (const h of ['[2001:db8::1]', '[2001:db8::1]:7410', '[2001:DB8:0::1]:7410', '[2001:0db8::0001]'])
        expect(hostAllowed(h, { listenHost, allowedOrigins: [] }), `${h} for ${listenHost}`).toBe(true);
    expect(hostAllowed('[2001:db8::2]:7410', { listenHost: '2001:db8::1', allowedOrigins: [] })).toBe(false);
    expect(hostAllowed('[2001:db8::1]', { listenHost: 'hub.example.com', allowedOrigins: ['http://[2001:db8::1]:7410'] })).toBe(true);
    expect(hostAllowed('[not-an-address]', { listenHost: 'not-an-address', allowedOrigins: [] })).toBe(false);
  });

  it('refuses anything after an IPv6 literal but a port', () => {
    for (const h of ['[::1]x.evil.com', '[::1]x.evil.com:80', '[::1].evil.com', '[::1]:80x', '[::1]:80:81', '[::1]]', '[::1'])
      expect(hostAllowed(h, LOOPBACK), h).toBe(false);
  });

  it('refuses other hosts, an empty host and a port that is not a number', () => {
    for (const h of [undefined, '', ':80', 'attacker.example', 'attacker.example:80', '127.evil.example', 'localhost:80x', 'localhost:80:81', 'localhost.evil.com', 'a b'])
      expect(hostAllowed(h, LOOPBACK), String(h)).toBe(false);
    expect(hostAllowed('hub.example.com.evil.com', PUBLIC)).toBe(false);
  });
});
