/**
 * The environment a stdio upstream is started with. Upstream servers are untrusted by default,
 * and the hub's own environment holds what its operator's shell held (cloud credentials, tokens
 * meant for one server, the hub's own keys): passing it whole would hand every server every
 * other server's secrets. So a child gets the few variables a program needs to run (where to
 * find commands, the user, home, terminal, locale, temporary files), what its config's
 * `inheritEnv` names, and its config's `env`, which wins. `inheritEnv: true` passes everything (as
 * every server got before the option existed); `false` passes only `env`.
 */

/** What every child gets from the hub's environment unless `inheritEnv` is false. */
const BASELINE: readonly string[] =
  process.platform === 'win32'
    ? ['PATH', 'PATHEXT', 'COMSPEC', 'SYSTEMROOT', 'SYSTEMDRIVE', 'WINDIR', 'TEMP', 'TMP', 'USERNAME', 'USERPROFILE', 'HOMEDRIVE', 'HOMEPATH', 'APPDATA', 'LOCALAPPDATA', 'PROGRAMFILES', 'PROCESSOR_ARCHITECTURE']
    : ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'TERM', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TMPDIR'];

/** `servers.<id>.inheritEnv`: everything, nothing beyond `env`, or the baseline plus these names (`PREFIX*` matches by prefix). */
export type InheritEnv = boolean | readonly string[];

export function childEnv(parent: NodeJS.ProcessEnv, inherit: InheritEnv | undefined, own: Readonly<Record<string, string>> = {}): Record<string, string> {
  // No prototype: a variable named `__proto__` (a name like any other to the system) is kept as
  // a key, where assigning it to a plain object set the object's prototype and dropped it.
  const out = Object.create(null) as Record<string, string>;
  if (inherit === true) {
    for (const [k, v] of Object.entries(parent)) if (v !== undefined) out[k] = v;
  } else if (inherit !== false) {
    for (const k of BASELINE) {
      const v = parent[k];
      if (v !== undefined) out[k] = v;
    }
    if (inherit?.length) {
      const exact = new Set(inherit.filter((n) => !n.endsWith('*')));
      const prefixes = inherit.filter((n) => n.endsWith('*')).map((n) => n.slice(0, -1));
      for (const [k, v] of Object.entries(parent))
        if (v !== undefined && (exact.has(k) || prefixes.some((p) => k.startsWith(p)))) out[k] = v;
    }
  }
  return Object.assign(out, own);
}
