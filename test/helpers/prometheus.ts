/**
 * A strict reader of the Prometheus text exposition format (0.0.4), so tests can both check
 * that /metrics parses and read values from it.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  types: Map<string, string>;
  help: Map<string, string>;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*';
const VALUE = String.raw`(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?Inf|[Nn][Aa][Nn])`; // prom-client writes "Nan"; Prometheus parses NaN case-insensitively
const SAMPLE = new RegExp(String.raw`^(${NAME})(\{(.*)\})?\s+(${VALUE})(?:\s+-?\d+)?$`);
const LABEL_PAIR = new RegExp(String.raw`(${LABEL})="((?:[^"\\\n]|\\[\\"n])*)"(,|$)`, 'y');
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** Throws with the line number on anything that is not valid exposition text. */
export function parseExposition(text: string): Exposition {
  const out: Exposition = { samples: [], types: new Map(), help: new Map() };
  if (text.length && !text.endsWith('\n')) throw new Error('exposition must end with a newline');
  text.split('\n').forEach((line, i) => {
    if (line === '') return;
    const where = `line ${i + 1}: ${line.slice(0, 120)}`;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // plain comment
      if (!new RegExp(`^${NAME}$`).test(m[2])) throw new Error(`bad metric name in ${where}`);
      if (m[1] === 'TYPE') {
        if (!TYPES.has(m[3])) throw new Error(`bad type in ${where}`);
        if (out.types.has(m[2])) throw new Error(`second TYPE for ${m[2]}`);
        out.types.set(m[2], m[3]);
      } else out.help.set(m[2], m[3]);
      return;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample: ${where}`);
    const labels: Record<string, string> = {};
    if (m[3]) {
      LABEL_PAIR.lastIndex = 0;
      let pos = 0;
      while (pos < m[3].length) {
        LABEL_PAIR.lastIndex = pos;
        const p = LABEL_PAIR.exec(m[3]);
        if (!p) throw new Error(`bad labels in ${where}`);
        labels[p[1]] = p[2].replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
        pos = LABEL_PAIR.lastIndex;
      }
    }
    const v = m[4];
    const value = /Inf$/.test(v) ? (v.startsWith('-') ? -Infinity : Infinity) : v === 'NaN' ? NaN : Number(v);
    out.samples.push({ name: m[1], labels, value });
  });
  return out;
}

/** GET /metrics of the hub whose MCP endpoint is `mcpUrl`. */
export async function scrape(mcpUrl: string): Promise<string> {
  const res = await fetch(new URL('/metrics', mcpUrl));
  if (!res.ok) throw new Error(`/metrics: HTTP ${res.status}`);
  return res.text();
}

/** The sum of the samples named `name` whose labels include `labels`. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  return parseExposition(text)
    .samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}
