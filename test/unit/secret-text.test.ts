/**
 * The credential rules: the shared shapes (tool results, upstream errors, ledger rows) and the
 * log-only rule for values assigned to a credential's name, which tool results must not get.
 */
import { describe, expect, it } from 'vitest';
import { redactLogText, redactSecretText } from '../../src/policy/secret-text.js';

describe('log-only credential assignments', () => {
  it.each([
    ['password=hunter22', 'password=[redacted:credential]'],
    ['DB_PASSWORD: s3cr3t-value', 'DB_PASSWORD: [redacted:credential]'],
    ['{"apiKey": "k-123456", "n": 1}', '{"apiKey": "[redacted:credential]", "n": 1}'],
    ['https://h/cb?access_token=abcdef&x=1', 'https://h/cb?access_token=[redacted:credential]&x=1'],
    ["client_secret='xyz987'", "client_secret='[redacted:credential]'"],
  ])('%s', (line, expected) => {
    expect(redactLogText(line)).toBe(expected);
  });

  it('leaves alone names that only look alike, and short values', () => {
    for (const line of ['tokens: 4096 used', 'max_tokens=512', 'password: ok', 'a secretary=Ann']) expect(redactLogText(line)).toBe(line);
  });

  it('is not applied to what tools return', () => {
    const code = 'function f(token: string, password = input) {}';
    expect(redactSecretText(code)).toBe(code);
    expect(redactLogText(code)).not.toBe(code);
  });

  it('still applies the shared shapes', () => {
    expect(redactLogText('using ghp_' + 'a'.repeat(36))).toBe('using [redacted:github-token]');
  });
});
