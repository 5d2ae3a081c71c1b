/**
 * Which token claims can name a principal: one that reads as itself in the ledger, the logs and
 * the status page. Ordinary subjects pass; the ledger's own names (however written), white space
 * at an end and anything invisible do not.
 */
import { describe, expect, it } from 'vitest';
import { principalProblem } from '../../src/auth/oauth.js';

const problem = (v: unknown) => principalProblem(v, 'sub');

describe('a token subject as a principal', () => {
  it('ordinary subjects are principals', () => {
    for (const s of ['alice', 'carol@example.com', 'auth0|123', 'google-oauth2|1098', '6f1c2b1e-8a8e-4c41-9d0b-3c1b5e0f2a77', 'Zoë Ångström', '李 小龙', 'Ольга Петрова', 'مريم', 'hubert', 'the hub', 'x'.repeat(256), '😀'])
      expect(problem(s), s).toBeUndefined();
  });

  it("the ledger's own names are refused however written (case, NFKC compatibility forms)", () => {
    for (const s of ['hub', 'HUB', 'Hub', 'ｈｕｂ', 'ℌub', 'anonymous', 'ANONYMOUS', 'Anonymous', '(unauthenticated)', '(Unauthenticated)', '﹙unauthenticated﹚', '（ＵＮＡＵＴＨＥＮＴＩＣＡＴＥＤ）', 'local', 'Local', 'ＬＯＣＡＬ'])
      expect(problem(s), s).toMatch(/keeps for itself/);
  });

  it('white space at either end is refused, inner white space is not', () => {
    for (const s of ['hub ', ' hub', 'alice\t', 'alice\u00a0', '\u3000alice', 'alice\u2003']) expect(problem(s), JSON.stringify(s)).toMatch(/white space|invisible/);
    expect(problem('hub ')).toMatch(/white space/);
    expect(problem('Mary Ann')).toBeUndefined();
  });

  it('controls, format, separator and other invisible characters are refused anywhere', () => {
    const bad = ['\u0000', '\u001f', '\u007f', '\u0085', '\u009b', '\u200b', '\u200d', '\u200e', '\u202e', '\u2066', '\u2028', '\u2029', '\ufeff', '\u00ad', '\u034f', '\u3164', '\ufe0f', '\ue000', '\ud800', '\u{e0041}'];
    for (const c of bad) expect(problem(`ali${c}ce`), JSON.stringify(c)).toMatch(/invisible/);
    expect(problem('anonymous\u200b')).toMatch(/invisible/);
  });

  it('no string, an empty one or one over 256 characters is refused', () => {
    for (const v of [undefined, null, 42, ['alice'], { sub: 'alice' }, '']) expect(problem(v), JSON.stringify(v)).toMatch(/no usable sub claim/);
    expect(problem('x'.repeat(257))).toMatch(/too long/);
  });
});
