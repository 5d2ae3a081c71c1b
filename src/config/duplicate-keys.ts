/**
 * The key paths that appear more than once in one object of a JSON text (which must parse).
 * Key names are shown, never values (a value may be a secret).
 */
export function duplicateKeys(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  const space = (): void => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  };
  const string = (): string => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: string): void => {
    space();
    const c = text[i];
    if (c === '{') {
      i++;
      const seen = new Set<string>();
      space();
      if (text[i] === '}') return void i++;
      for (;;) {
        space();
        const key = string();
        const at = path ? `${path}.${key}` : key;
        if (seen.has(key)) out.push(`${at}: the key appears more than once in its object (remove or rename one)`);
        seen.add(key);
        space();
        i++; // ':'
        value(at);
        space();
        if (text[i++] === '}') return;
      }
    }
    if (c === '[') {
      i++;
      space();
      if (text[i] === ']') return void i++;
      for (let n = 0; ; n++) {
        value(`${path}[${n}]`);
        space();
        if (text[i++] === ']') return;
      }
    }
    if (c === '"') return void string();
    while (i < text.length && !',}] \t\n\r'.includes(text[i]!)) i++; // a number, true, false or null
  };
  value('');
  return [...new Set(out)];
}
